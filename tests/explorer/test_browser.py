"""The explorer's page in a real browser (Chromium driven by Playwright): the exported page
opened from a file, and the page served by the app, with tiny trained models of every kind.

One browser for the module; each test gets a fresh context (its own storage) and fails on any
console error, uncaught exception, or request that leaves the page's own origin.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest
import torch

from qkv.explorer.page import page_data, render_page
from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import Limits, token_view
from qkv.tasks.registry import task
from tests.browser import require_chromium
from tests.explorer.models import explorer_models
from tests.explorer.server import serve_models

require_chromium()
pytest.importorskip("sklearn", reason="the ViT and captioner learn scikit-learn's digits")

pytestmark = pytest.mark.usefixtures("one_thread")

KINDS = ("translation", "language_model", "vit", "caption")
TIMEOUT = 10_000  # ms: anything the page does takes well under a second


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    return explorer_models(tmp_path_factory, KINDS)


@pytest.fixture(scope="module")
def results(model_dirs) -> dict[str, dict]:
    """A real RESULT of each kind, as ``qkv explore`` would inline it."""
    models = ExplorerModels.load([model_dirs[k] for k in KINDS])
    by_kind = {m.kind: m for m in models}
    limits = Limits()
    return {
        "translation": by_kind["translation"].run(text="a b c d e f", limits=limits),
        "language_model": by_kind["language_model"].run(
            text="In the beginning", max_new_tokens=8, limits=limits
        ),
        "vit": by_kind["image_classification"].run(
            image=digit_png(3), image_name="three.png", limits=limits
        ),
        "caption": by_kind["captioning"].run(
            image=digit_png(1, 2), image_name="strip.png", limits=limits
        ),
    }


@pytest.fixture(scope="module")
def server(model_dirs):
    with serve_models([model_dirs[k] for k in KINDS]) as url:
        yield url


class Watched:
    """A page, with every request it made and every error it reported."""

    def __init__(self, page) -> None:
        self.page = page
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("console", self._console)
        page.set_default_timeout(TIMEOUT)

    def _console(self, message) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def requests_outside(self, origin: str) -> list[str]:
        return [url for url in self.requests if not url.startswith(origin)]


@pytest.fixture
def watched(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    page = Watched(context.new_page())
    yield page
    context.close()
    assert page.errors == [], f"the page reported errors: {page.errors}"


# ------------------------------------------------------------------------------ helpers


def digit_png(*indices: int) -> bytes:
    """Real 8x8 digits from scikit-learn (image ``i`` of the set shows the digit ``i`` for
    ``i < 10``), side by side, as a grayscale PNG."""
    from PIL import Image
    from sklearn.datasets import load_digits

    images = load_digits().images  # (N, 8, 8) intensities 0..16
    strip = torch.cat([torch.from_numpy(images[i]) for i in indices], dim=1)
    pixels = (strip * 255 / 16).round().to(torch.uint8).numpy()
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")  # (H, W) uint8: grayscale
    return buffer.getvalue()


def open_static(watched: Watched, tmp_path: Path, result: dict, name: str = "page.html"):
    kind = result["kind"]
    model = {"name": result["model"], "kind": kind, "label": task(kind).label,
             "input": task(kind).input}  # fmt: skip
    html = render_page(page_data("static", [model], Limits(), result))
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    watched.page.goto(path.as_uri())
    watched.page.wait_for_selector("#app[data-state=done]")
    return path.as_uri()


def drawn(canvas) -> str:
    """What a canvas shows, as a PNG data URL (equal strings: equal pixels)."""
    return canvas.evaluate("c => c.toDataURL('image/png')")


def pixel(canvas, x: float, y: float) -> list[int]:
    return canvas.evaluate(
        "(c, [x, y]) => Array.from(c.getContext('2d').getImageData(x, y, 1, 1).data)", [x, y]
    )


def head_weights(view: dict, layer: int, head: int | str) -> torch.Tensor:
    weights = torch.tensor(view["layers"][layer])  # (H, Tq, Tk)
    return weights.mean(0) if head == "mean" else weights[head]


def view_of(result: dict, view_id: str) -> dict:
    return next(v for v in result["views"] if v["id"] == view_id)


# ------------------------------------------------------------------------ exported page


def test_exported_page_shows_the_output_and_a_heatmap_and_loads_nothing(watched, tmp_path, results):
    result = results["translation"]
    url = open_static(watched, tmp_path, result)
    page = watched.page
    assert page.get_attribute("#app", "data-mode") == "static"
    assert "exported page" in page.text_content("header")
    assert page.locator("#run-button").count() == 0
    assert page.text_content("#output .summary") == result["output"]["summary"]
    ids = page.locator(".view").evaluate_all("vs => vs.map(v => v.dataset.viewId)")
    assert ids == [v["id"] for v in result["views"]] and "cross" in ids
    matrix = page.locator('.view[data-view-id="cross"] .matrix')
    assert (matrix.get_attribute("data-layer"), matrix.get_attribute("data-head")) == ("0", "mean")
    cross = view_of(result, "cross")
    labels = matrix.locator(".col-label").all_text_contents()
    assert len(labels) == len(cross["keys"]) and matrix.locator(".row-label").count() == len(
        cross["queries"]
    )
    colours = matrix.locator("canvas").evaluate(
        "c => new Set(Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)"
        ".map(String)).size"
    )
    assert colours > 5
    assert watched.requests == [url]


def test_head_selector_and_thumbnails_change_what_is_drawn(watched, tmp_path, results):
    result = results["translation"]
    open_static(watched, tmp_path, result)
    view = watched.page.locator('.view[data-view-id="cross"]')
    matrix, canvas = view.locator(".matrix"), view.locator(".matrix-canvas")
    cross = view_of(result, "cross")
    cell = canvas.evaluate("c => c.width") / len(cross["keys"])
    seen = {"mean": drawn(canvas)}

    view.locator(".head-select").select_option("1")
    assert matrix.get_attribute("data-head") == "1"
    seen[1] = drawn(canvas)
    view.locator('.head-thumb[data-head="2"]').click()
    assert matrix.get_attribute("data-head") == "2"
    assert view.locator(".head-select").input_value() == "2"
    assert view.locator('.head-thumb[data-head="2"]').get_attribute("aria-pressed") == "true"
    seen[2] = drawn(canvas)
    assert len(set(seen.values())) == 3, "each head is drawn differently"

    # The drawing is the weights: the largest weight gets the darkest blue, a ~0 one near white.
    weights = head_weights(cross, 0, 2)
    i, j = divmod(int(weights.argmax()), weights.size(1))
    assert pixel(canvas, (j + 0.5) * cell, (i + 0.5) * cell)[:3] == [8, 48, 107]
    i, j = divmod(int(weights.argmin()), weights.size(1))
    if weights[i, j] < 0.02 * weights.max():
        assert min(pixel(canvas, (j + 0.5) * cell, (i + 0.5) * cell)[:3]) > 230

    view.locator(".layer-select").select_option("1")
    assert (matrix.get_attribute("data-layer"), matrix.get_attribute("data-head")) == ("1", "2")
    assert drawn(canvas) not in seen.values()
    thumbs = view.locator(".head-thumb canvas")
    assert thumbs.count() == 1 + len(cross["layers"][0])


def test_hovering_a_target_token_highlights_its_source_tokens(watched, tmp_path, results):
    result = results["translation"]
    open_static(watched, tmp_path, result)
    view = watched.page.locator('.view[data-view-id="cross"]')
    cross = view_of(result, "cross")
    row = len(cross["queries"]) // 2
    weights = head_weights(cross, 0, "mean")[row]
    # The page rounds nothing: its mean of the rounded weights is this one.
    expected = {j for j, w in enumerate(weights.tolist()) if w > 0 and w >= 0.2 * weights.max()}

    def highlighted() -> tuple[list[str], set[int]]:
        queries = view.locator('.row-label[data-highlight="query"]').evaluate_all(
            "ns => ns.map(n => n.dataset.q)"
        )
        keys = view.locator('.col-label[data-highlight="key"]').evaluate_all(
            "ns => ns.map(n => Number(n.dataset.k))"
        )
        return queries, set(keys)

    view.locator(f'.row-label[data-q="{row}"]').hover()
    assert highlighted() == ([str(row)], expected)
    readout = view.locator(".readout").text_content()
    assert f"target {row}" in readout and f"{float(weights.max()):.3f}" in readout

    # The same from the matrix itself: hovering a cell of that row, which names the cell's weight.
    canvas = view.locator(".matrix-canvas")
    cell = canvas.evaluate("c => c.width") / len(cross["keys"])
    canvas.hover(position={"x": 0.5 * cell, "y": (row + 0.5) * cell})
    assert highlighted() == ([str(row)], expected)
    assert f"source 0): {float(weights[0]):.3f}" in view.locator(".readout").text_content()

    view.locator("h2").hover()
    assert highlighted() == ([], set())

    # From the keyboard: arrow keys move between rows, Escape lets go.
    view.locator(".matrix").focus()
    for _ in range(row + 1):
        watched.page.keyboard.press("ArrowDown")
    assert highlighted() == ([str(row)], expected)
    watched.page.keyboard.press("Escape")
    assert highlighted() == ([], set())


def test_head_view_shows_the_lines_of_the_hovered_token_only(watched, tmp_path, results):
    result = results["translation"]
    open_static(watched, tmp_path, result)
    view = watched.page.locator('.view[data-view-id="cross"]')
    view.locator(".mode-heads").click()
    assert view.get_attribute("data-mode") == "heads"
    assert view.locator(".heads-view").is_visible() and not view.locator(".matrix").is_visible()
    visible_groups = (
        "svg => Array.from(svg.querySelectorAll('g.q-lines'))"
        ".filter(g => getComputedStyle(g).display !== 'none').map(g => g.dataset.q)"
    )
    svg = view.locator(".heads-svg")
    cross = view_of(result, "cross")
    assert len(svg.evaluate(visible_groups)) == len(cross["queries"])
    assert svg.locator("line").count() >= len(cross["queries"])

    view.locator('.q-token[data-q="1"]').hover()
    assert svg.evaluate(visible_groups) == ["1"]
    assert view.locator('.q-token[data-highlight="query"]').get_attribute("data-q") == "1"
    assert view.locator('.k-token[data-highlight="key"]').count() >= 1
    # Opacity follows the weight: the strongest line of the row is the most opaque.
    lines = svg.locator('g[data-q="1"] line').evaluate_all(
        "ls => ls.map(l => [Number(l.dataset.weight), Number(l.getAttribute('stroke-opacity'))])"
    )
    assert max(lines)[1] == max(opacity for _, opacity in lines)

    view.locator('.head-thumb[data-head="0"]').click()
    assert view.locator(".heads-view").get_attribute("data-head") == "0"
    view.locator("h2").hover()
    assert len(svg.evaluate(visible_groups)) == len(cross["queries"])


def test_image_view_switches_groups_and_maps(watched, tmp_path, results):
    result = results["vit"]
    url = open_static(watched, tmp_path, result)
    page = watched.page
    canvas = page.locator('.view[data-view-id="vit"] .image-canvas[data-loaded="true"]')
    groups = view_of(result, "vit")["groups"]
    assert (canvas.get_attribute("data-group"), canvas.get_attribute("data-map")) == (
        "rollout",
        "rollout",
    )
    assert canvas.evaluate("c => [c.width, c.height]") == [320, 320]  # 8x8 pixels, 40x
    before = drawn(canvas)
    page.select_option('.view[data-view-id="vit"] .group-select', "2")
    assert (canvas.get_attribute("data-group"), canvas.get_attribute("data-map")) == (
        groups[2]["name"],
        "head mean",
    )
    labels = page.locator(".map-button").all_text_contents()
    assert labels == [m["label"] for m in groups[2]["maps"]]
    layer_mean = drawn(canvas)
    page.locator('.map-button[data-map="1"]').click()
    assert canvas.get_attribute("data-map") == groups[2]["maps"][1]["label"]
    head = drawn(canvas)
    assert len({before, layer_mean, head}) == 3
    page.locator('.map-button[data-map="2"]').hover()  # a preview while hovered
    assert canvas.get_attribute("data-map") == groups[2]["maps"][2]["label"]
    page.locator("h2").first.hover()
    assert canvas.get_attribute("data-map") == groups[2]["maps"][1]["label"]
    assert drawn(canvas) == head
    assert [u for u in watched.requests if not u.startswith("data:image/png")] == [url]


def test_caption_view_has_one_map_per_word(watched, tmp_path, results):
    result = results["caption"]
    open_static(watched, tmp_path, result)
    page = watched.page
    words = result["output"]["words"]
    assert page.text_content("#output .summary") == " ".join(words)
    buttons = page.locator('.view[data-view-id="caption"] .map-button')
    assert buttons.all_text_contents() == [f"{i}: {w}" for i, w in enumerate(words)]
    canvas = page.locator(".image-canvas[data-loaded=true]")
    size = result["input"]["image"]
    assert canvas.evaluate("c => c.width / c.height") == size["width"] / size["height"]
    buttons.last.hover()
    assert canvas.get_attribute("data-map") == f"{len(words) - 1}: {words[-1]}"


def test_a_model_without_attention_says_so(watched, tmp_path, results):
    result = {**results["translation"], "views": []}
    open_static(watched, tmp_path, result)
    assert watched.page.text_content(".no-views") == "this model has no attention to show"


def test_text_from_the_data_is_shown_as_text(watched, tmp_path):
    evil = '<img src="https://example.com/x.png" onerror="window.pwned=1">'
    closing = "</script><script>window.pwned=2</script>"
    tokens = [evil, closing, "&amp;", "{{js}}"]
    weights = torch.softmax(torch.randn(2, len(tokens), len(tokens)), dim=-1)
    view = token_view("encoder", evil, tokens, tokens, [weights], self_attention=True)
    output = {"summary": closing, "probabilities": {evil: 1.0}}
    result = {"model": closing, "kind": "classification", "input": {"text": evil},
              "output": output, "views": [view]}  # fmt: skip
    url = open_static(watched, tmp_path, result)
    page = watched.page
    assert page.evaluate("window.pwned") is None
    assert page.locator("img").count() == 0 and page.locator("#app script").count() == 0
    assert page.text_content("#output .summary") == closing
    assert page.text_content(".view h2") == evil
    assert page.locator(".row-label").all_text_contents() == [
        evil.replace(" ", "␣"), closing, "&amp;", "{{js}}"
    ]  # fmt: skip
    assert page.text_content(".prob-label") == evil
    assert watched.requests == [url]


def test_entities_are_marked_in_their_types_colours_beside_the_attention(watched, tmp_path):
    words = ["Paul", "Smith", "flew", "to", "<b>Oslo</b>", "with", "Ann", "."]
    tags = ["B-person", "I-person", "O", "O", "B-geo-loc", "O", "B-person", "O"]
    entities = [
        {"type": "person", "start": 0, "end": 2, "text": "Paul Smith"},
        {"type": "geo-loc", "start": 4, "end": 5, "text": "<b>Oslo</b>"},
        {"type": "person", "start": 6, "end": 7, "text": "Ann"},
    ]
    weights = torch.softmax(torch.randn(2, len(words), len(words)), dim=-1)
    view = token_view("encoder", "encoder self-attention", words, words, [weights],
                      self_attention=True)  # fmt: skip
    pairs = [[word, tag] for word, tag in zip(words, tags, strict=True)]
    output = {"summary": "[Paul Smith](person) ...", "tags": pairs, "entities": entities,
              "types": ["geo-loc", "person", "product"]}  # fmt: skip
    result = {"model": "wnut", "kind": "ner", "input": {"text": " ".join(words)},
              "output": output, "views": [view]}  # fmt: skip
    open_static(watched, tmp_path, result)
    page = watched.page
    marks = page.locator("mark.entity")
    types = marks.evaluate_all("ms => ms.map(m => m.dataset.type)")
    assert types == ["person", "geo-loc", "person"]
    assert marks.locator("span:first-child").all_text_contents() == ["Paul Smith", "<b>Oslo</b>",
                                                                     "Ann"]  # fmt: skip
    assert page.locator("#output b").count() == 0  # the word is text, not markup
    colours = marks.evaluate_all("ms => ms.map(m => getComputedStyle(m).backgroundColor)")
    assert colours[0] == colours[2] != colours[1]
    assert page.locator(".entity-key").all_text_contents() == ["geo-loc", "person", "product"]
    assert page.text_content(".entities .muted") == "3 entities found"
    assert page.locator(".view").count() == 1  # the attention beside the entities


def test_a_long_sequence_scrolls_and_stays_usable(watched, tmp_path):
    tokens = [f"t{i}" for i in range(256)]
    keep = torch.ones(256, 256).tril().bool()
    scores = torch.randn(2, 256, 256).masked_fill(~keep, float("-inf"))
    view = token_view("decoder", "causal self-attention", tokens, tokens,
                      [torch.softmax(scores, -1)] * 2, self_attention=True)  # fmt: skip
    result = {"model": "long", "kind": "language_model", "input": {"text": "x"},
              "output": {"summary": "x"}, "views": [view]}  # fmt: skip
    open_static(watched, tmp_path, result)
    page = watched.page
    scroll = page.locator(".matrix-scroll")
    width, height = scroll.evaluate(
        "s => [s.scrollWidth > s.clientWidth, s.scrollHeight > s.clientHeight]"
    )
    assert width and height
    page.locator('.row-label[data-q="200"]').hover()  # scrolled into view first
    assert page.locator('.col-label[data-highlight="key"]').count() >= 1
    page.locator(".mode-heads").click()
    page.locator('.q-token[data-q="255"]').hover()
    assert page.locator('.q-token[data-highlight="query"]').get_attribute("data-q") == "255"


def test_a_screenshot_is_a_real_picture(watched, tmp_path, results):
    from PIL import Image

    open_static(watched, tmp_path, results["translation"])
    path = tmp_path / "explorer.png"
    watched.page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    with Image.open(path) as image:
        assert image.width == 1280 and image.height >= 900
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


# --------------------------------------------------------------------------- served page


def test_served_page_runs_a_text_model(watched, server, model_dirs):
    page = watched.page
    page.goto(server)
    page.wait_for_selector("#app[data-state=ready]")
    names = page.locator("#model-select option").evaluate_all("os => os.map(o => o.value)")
    assert names == [model_dirs[k].name for k in KINDS]
    page.select_option("#model-select", "reverse")
    assert (
        page.locator("#text-input").is_visible() and not page.locator("#image-input").is_visible()
    )
    assert not page.locator("#new-tokens").is_visible()
    page.fill("#text-input", "c a b d")
    page.click("#run-button")
    page.wait_for_selector("#app[data-state=done]")
    answer = httpx.post(server + "api/run", json={"model": "reverse", "text": "c a b d"}).json()
    assert page.text_content("#output .summary") == answer["output"]["summary"]
    assert page.locator('.view[data-view-id="cross"] .matrix[data-head="mean"]').count() == 1
    assert page.locator(".view").count() == len(answer["views"])
    assert watched.requests_outside(server) == []
    assert [u for u in watched.requests if "api/" in u] == [server + "api/run"]


def test_served_language_model_takes_a_number_of_new_tokens(watched, server):
    page = watched.page
    page.goto(server)
    page.select_option("#model-select", "kjv-char")
    assert page.locator("#new-tokens").is_visible()
    page.fill("#text-input", "And God said")
    page.fill("#new-tokens", "5")
    with page.expect_request("**/api/run") as request:
        page.click("#run-button")
    assert json.loads(request.value.post_data) == {
        "model": "kjv-char", "text": "And God said", "max_new_tokens": 5
    }  # fmt: skip
    page.wait_for_selector("#app[data-state=done]")
    assert page.text_content("#output .prompt") == "And God said"
    assert page.locator(".view .row-label").count() >= len("And God said")


def test_served_page_runs_the_vit_on_an_uploaded_digit(watched, server):
    page = watched.page
    page.goto(server)
    page.select_option("#model-select", "vit-digits")
    assert (
        page.locator("#image-input").is_visible() and not page.locator("#text-input").is_visible()
    )
    page.set_input_files(
        "#image-input",
        files=[{"name": "seven.png", "mimeType": "image/png", "buffer": digit_png(7)}],
    )
    page.wait_for_selector("#image-preview:visible")
    with page.expect_request("**/api/run") as request:
        page.click("#run-button")
    body = json.loads(request.value.post_data)
    assert body["image"].startswith("data:image/png;base64,") and body["image_name"] == "seven.png"
    page.wait_for_selector("#app[data-state=done]")
    assert page.locator(".prob-row").count() == 10
    canvas = page.locator('.view[data-view-id="vit"] .image-canvas[data-loaded="true"]')
    before = drawn(canvas)
    page.select_option(".group-select", "4")
    page.locator('.map-button[data-map="3"]').click()
    assert (canvas.get_attribute("data-group"), canvas.get_attribute("data-map")) == (
        "layer 3",
        "head 2",
    )
    assert drawn(canvas) != before
    assert watched.requests_outside(server) == []


def test_served_page_shows_the_servers_error(watched, server):
    page = watched.page
    page.goto(server)
    page.select_option("#model-select", "reverse")
    for text in ("   ", "a " * 600):
        expected = httpx.post(server + "api/run", json={"model": "reverse", "text": text})
        assert expected.status_code == 422
        page.fill("#text-input", text)
        page.click("#run-button")
        page.wait_for_selector("#app[data-state=error]")
        assert page.text_content("#error") == expected.json()["error"]
        page.fill("#text-input", "a b")
        page.click("#run-button")
        page.wait_for_selector("#app[data-state=done]")
        assert page.text_content("#error") == ""
    page.select_option("#model-select", "vit-digits")
    page.set_input_files(
        "#image-input",
        files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"not a png"}],
    )
    page.click("#run-button")
    page.wait_for_selector("#app[data-state=error]")
    assert "notes.png" in page.text_content("#error")
    # Chromium logs each 4xx answer as a console error; those were the point here.
    watched.errors[:] = [e for e in watched.errors if "status of 422" not in e]


def test_served_page_says_when_the_server_does_not_answer(watched, server):
    page = watched.page
    page.goto(server)
    page.route("**/api/run", lambda route: route.abort())
    page.select_option("#model-select", "reverse")
    page.fill("#text-input", "a b")
    page.click("#run-button")
    page.wait_for_selector("#app[data-state=error]")
    assert page.text_content("#error") == "the server did not answer"
    assert page.is_enabled("#run-button")
    watched.errors.clear()  # Chromium logs the aborted request as a console error

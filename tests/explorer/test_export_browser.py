"""The attention page's export buttons and model view in a real browser (headless Chromium
driven by Playwright, offline): a click saves a view as SVG (read back: every token, the title
naming the layer and head, one rect per weight, the darkest where the weight is largest) and as
PNG (decoded: its size and its colours); the model view draws every layer and head, each
thumbnail's darkest cell where its weight is largest, and a click enlarges that one."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from qkv.explorer.page import render_page
from qkv.viz.notebook import inline_html
from qkv.viz.view_json import image_view, token_view
from tests.browser import offline_page, require_chromium

require_chromium()
TIMEOUT = 10_000  # ms
SVG = "{http://www.w3.org/2000/svg}"
DARKEST_BLUE = (8, 48, 107)  # the page's colour for a matrix's largest weight (#08306b)
TOKENS = ["[CLS]", "the", "<b>cat</b>", "a&b", "sat", "down", "[SEP]"]


@pytest.fixture
def page(browser):
    with offline_page(browser, width=1280, timeout=TIMEOUT, downloads=True) as page:
        yield page


def layers(tokens: list[str], count: int = 2, heads: int = 3, seed: int = 0) -> list[torch.Tensor]:
    """``count`` layers of ``(H, T, T)`` weights, rows summing to one, all distinct."""
    generator = torch.Generator().manual_seed(seed)
    size = (heads, len(tokens), len(tokens))
    return [torch.softmax(3 * torch.randn(size, generator=generator), -1) for _ in range(count)]


def open_result(page, tmp_path: Path, views: list[dict]) -> None:
    result = {"model": "m", "kind": "classification", "input": {"text": "x"},
              "output": {"summary": "s"}, "views": views}  # fmt: skip
    path = tmp_path / "page.html"
    path.write_text(render_page({"mode": "static", "models": [], "limits": {}, "result": result}))
    page.goto(path.as_uri())
    page.wait_for_selector("#app[data-state=done]")


def saved(page, selector: str, where=None) -> tuple[str, bytes]:
    """Click ``selector`` and return the download's file name and bytes."""
    with page.expect_download() as download:
        (where or page).locator(selector).click()
    return download.value.suggested_filename, Path(download.value.path()).read_bytes()


def shown(token: str) -> str:
    return token.replace(" ", "␣")


def luminance(rgb: tuple[int, ...]) -> float:
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def test_a_token_view_saves_as_svg_with_every_token_the_title_and_its_weights(page, tmp_path):
    weights = layers(TOKENS)
    open_result(page, tmp_path, [token_view("enc", "encoder", TOKENS, TOKENS, weights,
                                            self_attention=True)])  # fmt: skip
    page.select_option(".layer-select", "1")
    page.select_option(".head-select", "2")
    name, body = saved(page, ".save-svg")
    assert name == "enc-layer-1-head-2.svg"
    root = ET.fromstring(body)
    title = "encoder · layer 1 · head 2"
    assert root.findtext(f"{SVG}title") == title
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert title in texts
    assert texts.count("<b>cat</b>") == 2 and texts.count("a&b") == 2  # a query and a key
    assert set(map(shown, TOKENS)) <= set(texts)
    cells = root.find(f"{SVG}g[@class='cells']")
    rects = list(cells)
    assert len(rects) == len(TOKENS) ** 2
    expected = torch.tensor([[float(r.get("data-weight")) for r in rects]]).view(7, 7)
    assert torch.allclose(expected, weights[1][2].double().round(decimals=4).float(), atol=1e-6)
    fills = [tuple(int(r.get("fill")[i : i + 2], 16) for i in (1, 3, 5)) for r in rects]
    assert fills[int(weights[1][2].argmax())] == DARKEST_BLUE
    assert min(range(len(fills)), key=lambda k: luminance(fills[k])) == weights[1][2].argmax()


def test_a_token_view_saves_as_png_with_its_labels(page, tmp_path):
    from PIL import Image

    weights = layers(TOKENS)
    open_result(page, tmp_path, [token_view("enc", "encoder", TOKENS, TOKENS, weights,
                                            self_attention=True)])  # fmt: skip
    name, body = saved(page, ".save-png")
    assert name == "enc-layer-0-mean.png" and body[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(body)) as image:
        rgb = image.convert("RGB")
    cells = len(TOKENS) * 20  # 20 px a cell, labels and title beside
    assert rgb.width > cells + 30 and rgb.height > cells + 40
    colours = {colour for _, colour in rgb.getcolors(maxcolors=1 << 20)}
    assert DARKEST_BLUE in colours  # the mean's largest weight
    assert len(colours) > 30  # cells of many weights, anti-aliased text: not blank


def test_an_image_view_saves_its_map_over_the_image(page, tmp_path):
    from PIL import Image

    generator = torch.Generator().manual_seed(1)
    grid = torch.rand(2, 3, generator=generator)
    image = (torch.rand(3, 16, 24, generator=generator) * 255).to(torch.uint8)
    view = image_view("vit", "ViT patches", image, [("layer 0", [("head 0", grid)])])
    open_result(page, tmp_path, [view])
    page.wait_for_selector("canvas.image-canvas[data-loaded=true]")
    name, body = saved(page, ".save-svg")
    root = ET.fromstring(body)
    assert name == "vit-layer-0-head-0.svg"
    assert root.findtext(f"{SVG}title") == "ViT patches · layer 0 · head 0"
    (picture,) = root.iter(f"{SVG}image")
    assert picture.get("href", "").startswith("data:image/png;base64,")
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("data-weight") is not None]
    assert [float(r.get("data-weight")) for r in rects] == pytest.approx(
        grid.flatten().tolist(), abs=1e-4
    )
    name, body = saved(page, ".save-png")
    with Image.open(io.BytesIO(body)) as png:
        assert name.endswith(".png") and png.width >= 24 * 13 and png.height >= 16 * 13
        assert len(png.convert("RGB").getcolors(maxcolors=1 << 20)) > 30


def test_a_view_too_long_for_svg_says_so_and_still_saves_png(page, tmp_path):
    tokens = [f"t{i}" for i in range(300)]
    weights = [torch.softmax(torch.randn(1, 300, 300), -1)]
    open_result(page, tmp_path, [token_view("dec", "long", tokens, tokens, weights,
                                            self_attention=True)])  # fmt: skip
    button = page.locator(".save-svg")
    assert button.is_disabled() and "too long for SVG (300 \u00d7 300" in button.get_attribute(
        "title"
    )
    _, body = saved(page, ".save-png")
    assert body[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_model_view_draws_every_layer_and_head_and_a_click_enlarges_one(page, tmp_path):
    weights = layers(TOKENS, count=3, heads=4)
    open_result(page, tmp_path, [token_view("enc", "encoder", TOKENS, TOKENS, weights,
                                            self_attention=True)])  # fmt: skip
    page.click(".mode-model")
    thumbs = page.locator(".model-thumb")
    assert thumbs.count() == 3 * 4
    for index in range(thumbs.count()):
        thumb = thumbs.nth(index)
        layer, head = int(thumb.get_attribute("data-layer")), int(thumb.get_attribute("data-head"))
        assert (layer, head) == divmod(index, 4)  # layers as rows, heads as columns
        # Each cell's centre pixel: (T, T, 4) RGBA.
        pixels = thumb.locator("canvas").evaluate(
            """(c, n) => { const s = c.width / n, ctx = c.getContext('2d'), out = [];
            for (let i = 0; i < n; i++) for (let j = 0; j < n; j++)
              out.push(Array.from(ctx.getImageData((j + 0.5) * s, (i + 0.5) * s, 1, 1).data));
            return out; }""",
            len(TOKENS),
        )
        darkness = -torch.tensor([luminance(p) for p in pixels])
        w = weights[layer][head].flatten()
        assert int(darkness.argmax()) == int(w.argmax()), (layer, head)
        # and darker wherever the weight is larger (equal colours for nearly equal weights)
        by_weight = darkness[w.argsort()]
        assert bool((by_weight[1:] >= by_weight[:-1] - 0.5).all()), (layer, head)
    page.click('.model-thumb[data-layer="2"][data-head="1"]')
    matrix = page.locator(".matrix")
    assert matrix.get_attribute("data-layer") == "2" and matrix.get_attribute("data-head") == "1"
    assert page.get_attribute(".view", "data-mode") == "matrix" and matrix.is_visible()
    assert page.input_value(".layer-select") == "2" and page.input_value(".head-select") == "1"


def test_a_notebook_display_saves_from_inside_its_sandboxed_frame(page, tmp_path):
    view = token_view("enc", "encoder", TOKENS, TOKENS, layers(TOKENS), self_attention=True)
    html = inline_html({"output": {"summary": "s"}, "views": [view]})
    path = tmp_path / "notebook.html"
    path.write_text(f"<!doctype html><html><body>{html}</body></html>", encoding="utf-8")
    page.goto(path.as_uri())
    frame = page.frame_locator("iframe.qkv-view")
    frame.locator("#app[data-state=done]").wait_for()
    name, body = saved(page, ".save-svg", where=frame)
    assert name == "enc-layer-0-mean.svg"
    assert ET.fromstring(body).findtext(f"{SVG}title") == "encoder · layer 0 · mean of heads"

"""Notebook displays in a real browser (headless Chromium driven by Playwright) with the network
off: a notebook-like page holding a translator's, a ViT's and a raw ``show_attention`` display
requests nothing but itself, each frame draws its canvases (not blank) and sizes itself to its
page. ``python -m tests.viz.test_notebook_browser docs/images/notebook-view.png`` saves the
screenshot kept in ``docs/``."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import qkv
from tests.browser import ARGS, CHROMIUM, require_chromium

require_chromium()

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
TIMEOUT = 10_000  # ms


def notebook_page() -> str:
    """A page as a notebook would hold three outputs: the displays one under another."""
    translator = qkv.load(RUNS / "translation")
    vit = qkv.load(RUNS / "image_classification")
    image = vit.read_image(RUNS / "data" / "image_classification" / "digits1.png")
    torch.manual_seed(0)
    raw = qkv.show_attention(
        [torch.softmax(torch.randn(2, 6, 6), -1) for _ in range(2)],
        ["[CLS]", "the", "cat", "sat", "down", "[SEP]"],
        title="any model's attention (qkv.show_attention)",
    )
    cells = [translator.views("a b c d"), vit.views(image), raw]
    outputs = "".join(f'<div class="output">{seen._repr_html_()}</div>' for seen in cells)
    return f"<!doctype html><html><body style='margin: 8px'>{outputs}</body></html>"


def open_offline(browser, path: Path, height: int):
    """The page opened from a file, the context offline and every request but the file's
    refused; returns (page, requests, errors)."""
    context = browser.new_context(viewport={"width": 1100, "height": height}, offline=True)
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.route(
        "**/*",
        lambda route: route.continue_() if route.request.url == path.as_uri() else route.abort(),
    )
    page.set_default_timeout(TIMEOUT)
    page.goto(path.as_uri())
    return page, requests, errors


def test_displays_draw_offline_in_their_own_frames(browser, tmp_path):
    path = tmp_path / "notebook.html"
    path.write_text(notebook_page(), encoding="utf-8")
    page, requests, errors = open_offline(browser, path, height=6000)  # every frame in view
    frames = [page.frame_locator(f"iframe >> nth={i}") for i in range(3)]
    for frame in frames:
        frame.locator("#app[data-state=done][data-inline=true]").wait_for()
    # Each display drew: its canvases hold more than one colour.
    for frame, canvas in zip(frames, ["canvas.matrix-canvas", "canvas.image-canvas",
                                      "canvas.matrix-canvas"], strict=True):  # fmt: skip
        colours = frame.locator(canvas).first.evaluate(
            "c => new Set(Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height)"
            ".data).map(String)).size"
        )
        assert colours > 5, (canvas, colours)
    assert frames[2].locator(".view").get_attribute("data-view-id") == "attention"
    assert frames[2].locator(".col-label").all_text_contents()[1] == "the"
    # Each frame is sized to its page (within the 4 px the sizer adds), after its page posted.
    for i in range(3):
        inner = page.frames[i + 1].evaluate("document.body.scrollHeight")
        page.wait_for_function(
            f"() => Math.abs(document.querySelectorAll('iframe')[{i}].getBoundingClientRect()"
            f".height - {inner} - 4) <= 1"
        )
    assert requests == [path.as_uri()], requests  # nothing but the page itself
    assert errors == []
    # The frames cannot reach the notebook (sandbox without same-origin): reading the parent's
    # document is refused.
    refused = page.frames[1].evaluate(
        "() => { try { return parent.document.title, false } catch (e) { return true } }"
    )
    assert refused


def save_screenshot(out: Path) -> None:
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page_file = out.resolve().with_suffix(".html")
        page_file.write_text(notebook_page(), encoding="utf-8")
        try:
            page, _, _ = open_offline(browser, page_file, height=4000)
            page.wait_for_timeout(1000)
            page.screenshot(path=str(out), full_page=True)
        finally:
            page_file.unlink()
            browser.close()


if __name__ == "__main__":
    save_screenshot(Path(sys.argv[1]))

"""A 1,000-token attention view on the page, in headless Chromium: the page's bytes and the time
to the matrix's first paint (and of a hover over it).

The view: ``qkv.show_attention`` of random row-stochastic weights, 1 layer x 2 heads, 1,000 x
1,000 tokens. The page is the notebook display's (``Seen.html()``: the page inside an
``<iframe srcdoc>``); it is timed as the page itself (:func:`qkv.viz.notebook.inline_page`)
loaded from a file, so that the clock is the page's own (``performance.now()`` from navigation).

Run: ``PYTHONPATH=src python benchmarks/page_long.py`` (Chromium at /usr/bin/chromium).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import torch

import qkv
from qkv.viz.notebook import inline_page
from qkv.viz.view_json import views_json

TOKENS = 1000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
# After the matrix's canvas exists, wait for the next frame: the time it is painted.
PAINTED = """() => new Promise((done) => requestAnimationFrame(() =>
  setTimeout(() => done(performance.now()), 0)))"""


def long_seen(tokens: int = TOKENS, seed: int = 0) -> qkv.Seen:
    generator = torch.Generator().manual_seed(seed)
    weights = torch.rand(2, tokens, tokens, generator=generator)  # (H, T, T)
    weights = weights / weights.sum(-1, keepdim=True)  # rows sum to 1
    return qkv.show_attention(weights, [f"t{i}" for i in range(tokens)], title="long")


def measure(runs: int = 3) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    seen = long_seen()
    result = {"output": seen.output, "views": views_json(seen.views)}
    page_html = inline_page(result)
    out = {"display_bytes": len(seen.html().encode()), "page_bytes": len(page_html.encode())}
    paints, hovers = [], []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        path = Path(tmp) / "long.html"
        path.write_text(page_html, encoding="utf-8")
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(path.as_uri(), timeout=120_000)
            page.wait_for_selector(".matrix-canvas", timeout=120_000)
            paints.append(page.evaluate(PAINTED))
            box = page.locator(".matrix-canvas").bounding_box()
            assert box is not None
            start = page.evaluate("performance.now()")
            page.mouse.move(box["x"] + box["width"] / 3, box["y"] + box["height"] / 4)
            hovers.append(page.evaluate(PAINTED) - start)
            page.close()
        browser.close()
    out["first_paint_ms"] = statistics.median(paints)
    out["hover_ms"] = statistics.median(hovers)
    return out


if __name__ == "__main__":
    for key, value in measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3).items():
        print(f"{key}: {value:,.0f}")

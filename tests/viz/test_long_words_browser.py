"""Long views and words on the attention page, in headless Chromium (offline): a 1,000-token
view from ``qkv.show_attention`` draws its matrix and a hover names the query and key under the
pointer; the "words" toggle shows ``merge_word_attention`` of the same view, and "hide special
tokens" drops exactly the special tokens' rows and columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import qkv
from qkv.viz.notebook import inline_page
from qkv.viz.view_json import token_view, views_json
from qkv.viz.words import SPECIAL_PIECES, merge_word_attention
from tests.browser import offline_page, require_chromium

require_chromium()
TIMEOUT = 60_000  # ms: a 1,000-token page on a busy 2-core machine
PIECES = ["[CLS]", "the", "cat", "##s", "sat", "on", "mat", "##ting", "##s", "[SEP]"]


@pytest.fixture
def page(browser):
    with offline_page(browser, width=1280, timeout=TIMEOUT) as page:
        yield page


def open_views(page, tmp_path: Path, views: list[dict]) -> None:
    path = tmp_path / "page.html"
    path.write_text(inline_page({"output": {"summary": "s"}, "views": views}), encoding="utf-8")
    page.goto(path.as_uri())
    page.wait_for_selector("#app[data-state=done]")


def test_a_1000_token_view_draws_and_a_hover_names_the_query_and_key(page, tmp_path):
    tokens = [f"t{i}" for i in range(1000)]
    weights = torch.rand(2, 1000, 1000, generator=torch.Generator().manual_seed(0))  # (H, T, T)
    seen = qkv.show_attention(weights / weights.sum(-1, keepdim=True), tokens, title="long")
    page.set_viewport_size({"width": 1600, "height": 1600})  # the whole matrix in view
    open_views(page, tmp_path, views_json(seen.views))
    canvas = page.locator(".matrix-canvas")
    # Drawn: the canvas holds more than one colour (a blank canvas is all transparent).
    colours = canvas.evaluate(
        """(c) => { const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        const seen = new Set(); for (let i = 0; i < d.length; i += 4 * 997) seen.add(
        `${d[i]},${d[i + 1]},${d[i + 2]},${d[i + 3]}`); return [...seen]; }"""
    )
    assert len(colours) > 10 and "0,0,0,0" not in colours
    assert page.locator(".row-label, .col-label, .q-token, .k-token").count() == 0
    for query, key in [(0, 999), (250, 600), (999, 0), (517, 517)]:
        # The matrix scrolls in its pane (640 px high in a notebook): bring the row into view.
        page.locator(".matrix-scroll").evaluate(f"(s) => {{ s.scrollTop = {query} - 300; }}")
        box = canvas.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + (key + 0.5) * box["width"] / 1000,
                        box["y"] + (query + 0.5) * box["height"] / 1000)  # fmt: skip
        readout = page.locator(".readout").text_content() or ""
        assert f"query {query} “t{query}”" in readout, readout
        assert f"“t{key}” (key {key})" in readout, readout
        # The weight it reads is the mean of the two heads, at the page's 4 digits.
        found = re.search(r"\(key \d+\): ([0-9.]+)", readout)
        assert found is not None
        shown = (weights / weights.sum(-1, keepdim=True))[:, query, key].mean().item()
        assert abs(float(found.group(1)) - shown) < 1e-3, readout


def shown_matrix(page) -> dict:
    return page.locator(".view").evaluate("(v) => v.qkvShown")


def test_words_show_merge_word_attention_and_hiding_drops_the_specials(page, tmp_path):
    generator = torch.Generator().manual_seed(1)
    layers = [torch.softmax(3 * torch.randn(2, 10, 10, generator=generator), -1) for _ in range(2)]
    open_views(page, tmp_path, [token_view("v", "t", PIECES, PIECES, layers, self_attention=True)])
    view = page.locator(".view")
    assert view.get_attribute("data-words") == "false"
    pieces = shown_matrix(page)
    assert pieces["queries"] == PIECES
    for hide in (False, True):
        page.locator(".view .words-toggle").check()
        if hide:
            page.locator(".view .special-toggle").check()
        view = page.locator(".view")
        assert view.get_attribute("data-words") == "true"
        assert view.get_attribute("data-hide-special") == str(hide).lower()
        assert "sum of its pieces' attention" in (page.locator(".words-note").text_content() or "")
        words = shown_matrix(page)
        for index, weights in enumerate(layers):
            expected = merge_word_attention(weights, PIECES, PIECES, marker="##", hide_special=hide)
            assert words["queries"] == expected.query_words
            assert words["keys"] == expected.key_words
            got = torch.tensor(words["layers"][index], dtype=torch.float64)  # (H, Wq, Wk)
            torch.testing.assert_close(got, expected.weights.double(), atol=5.1e-5, rtol=0)
        width = page.locator(".matrix-canvas").evaluate("(c) => c.width")
        assert width % len(words["keys"]) == 0  # one cell per word
        # Back to the pieces: hiding drops exactly the special pieces' rows and columns.
        page.locator(".view .words-toggle").uncheck()
        kept = [i for i, t in enumerate(PIECES) if not (hide and t in SPECIAL_PIECES)]
        now = shown_matrix(page)
        assert now["queries"] == now["keys"] == [PIECES[i] for i in kept]
        full = torch.tensor(pieces["layers"], dtype=torch.float64)  # (L, H, T, T)
        assert torch.equal(torch.tensor(now["layers"], dtype=torch.float64),
                           full[:, :, kept][:, :, :, kept])  # fmt: skip
        if hide:
            assert len(kept) == len(PIECES) - 2


def test_a_view_without_markers_or_specials_has_no_toggles(page, tmp_path):
    tokens = ["a", "b", "c"]
    layers = [torch.softmax(torch.randn(1, 3, 3), -1)]
    open_views(page, tmp_path, [token_view("v", "t", tokens, tokens, layers, self_attention=True)])
    assert page.locator(".words-toggle, .special-toggle").count() == 0

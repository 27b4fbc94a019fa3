"""The attention page's compare mode in a real browser (headless Chromium through Playwright,
offline): it draws A, B and the difference B - A; a cell where B > A and one where B < A get
colours of opposite hue (red and blue), a cell where they are equal is white; the difference's
range is the largest |B - A| shown; one selector drives A, B and the difference alike; the
notebook display's frame draws the same."""

from __future__ import annotations

import pytest
import torch

from qkv.tasks.spec import Seen, TokenView
from tests.browser import offline_page, require_chromium

require_chromium()
TIMEOUT = 10_000  # ms
TOKENS = ["[CLS]", "the", "<b>cat</b>", "sat"]


@pytest.fixture
def page(browser):
    with offline_page(browser, width=1400, timeout=TIMEOUT) as page:
        yield page


def two_seens() -> tuple[Seen, Seen]:
    """A and B of 2 heads over 4 tokens: B - A is +0.3 at query 0's key 0, -0.2 at its key 1,
    0 at its key 2 (head 0); head 1 differs only at query 3 (+0.1 at key 3, -0.1 at key 0)."""
    base = torch.full((2, 4, 4), 0.25)  # (H, Tq, Tk)
    b = base.clone()
    b[0, 0] = torch.tensor([0.55, 0.05, 0.25, 0.15])
    b[1, 3] = torch.tensor([0.15, 0.25, 0.25, 0.35])
    a_view = TokenView("encoder", "encoder self-attention", TOKENS, TOKENS, [base], True)
    b_view = TokenView("encoder", "encoder self-attention", TOKENS, TOKENS, [b], True)
    return Seen({"summary": "a"}, [a_view]), Seen({"summary": "b"}, [b_view])


def pixel(frame, side: str, i: int, j: int) -> list[int]:
    """The colour at the centre of cell (query i, key j) of the ``side`` canvas."""
    return frame.evaluate(
        """([side, i, j]) => { const c = document.querySelector(
             `.compare-pair canvas.compare-canvas[data-side="${side}"]`);
           const cell = Number(c.dataset.cell);
           const p = c.getContext("2d").getImageData((j + 0.5) * cell, (i + 0.5) * cell, 1, 1);
           return Array.from(p.data.slice(0, 3)); }""",
        [side, i, j],
    )


def test_the_compare_page_draws_a_b_and_a_diverging_difference(page, tmp_path):
    a, b = two_seens()
    path = tmp_path / "compare.html"
    path.write_text(a.compare(b, names=("before", "after")).page())
    page.goto(path.as_uri())
    page.wait_for_selector("#app[data-mode=compare][data-state=done]")
    assert page.locator(".compare-output").all_inner_texts() == ["before: a", "after: b"]
    pair = page.locator(".compare-pair[data-view-id=encoder]")
    assert [pair.locator(f"canvas[data-side={s}]").count() for s in ("a", "b", "diff")] == [1] * 3
    pair.locator(".head-select").select_option("0")
    diff = pair.locator("canvas[data-side=diff]")
    assert float(diff.get_attribute("data-max-abs")) == pytest.approx(0.3)
    up, down, same = (pixel(page, "diff", 0, j) for j in (0, 1, 2))
    assert up[0] > up[2] + 100, f"B > A must be red, got {up}"
    assert down[2] > down[0] + 50, f"B < A must be blue, got {down}"
    assert min(same) > 240, f"B = A must be white, got {same}"
    # A and B on one scale: A's uniform cell lighter than B's larger weight
    assert sum(pixel(page, "b", 0, 0)) < sum(pixel(page, "a", 0, 0))
    # One selector drives all three: head 1 moves the difference to query 3
    pair.locator(".head-select").select_option("1")
    assert pair.get_attribute("data-head") == "1"
    assert float(diff.get_attribute("data-max-abs")) == pytest.approx(0.1)
    assert min(pixel(page, "diff", 0, 0)) > 240  # head 1 has no difference in query 0
    assert pixel(page, "diff", 3, 3)[0] > pixel(page, "diff", 3, 3)[2]
    assert pixel(page, "diff", 3, 0)[2] > pixel(page, "diff", 3, 0)[0]
    # the head mean: half of head 0's largest difference
    pair.locator(".head-select").select_option("mean")
    assert float(diff.get_attribute("data-max-abs")) == pytest.approx(0.15)


def test_the_notebook_display_draws_the_comparison_in_its_frame(page, tmp_path):
    a, b = two_seens()
    path = tmp_path / "notebook.html"
    path.write_text(f"<!doctype html><html><body>{a.compare(b)._repr_html_()}</body></html>")
    page.goto(path.as_uri())
    frame = page.frame_locator("iframe.qkv-view")
    frame.locator("#app[data-mode=compare][data-state=done][data-inline]").wait_for()
    (inner,) = [f for f in page.frames if f is not page.main_frame]
    up = pixel(inner, "diff", 0, 0)
    assert up[0] > up[2] + 100

"""The attention page's compare mode in a real browser (headless Chromium through Playwright,
offline): it draws A, B and the difference B - A; a cell where B > A and one where B < A get
colours of opposite hue (red and blue), a cell where they are equal is white; the difference's
range is the largest |B - A| shown; one selector drives A, B and the difference alike; the
notebook display's frame draws the same. Image views: A's and B's maps over the image (drawn
under them) and B - A over it, red where B is above A, blue where below; the map selector drives
all three."""

from __future__ import annotations

import pytest
import torch

from qkv.tasks.seen import ImageView, MapGroup, Seen, TokenView
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


def pixel(frame, side: str, i: int, j: int, grid: int = 0) -> list[int]:
    """The colour at the centre of cell (query i, key j) of the ``side`` canvas; with ``grid``,
    of cell (row i, column j) of an image's ``grid`` x ``grid`` cells."""
    return frame.evaluate(
        """([side, i, j, grid]) => { const c = document.querySelector(
             `.compare-pair canvas.compare-canvas[data-side="${side}"]`);
           const w = grid ? c.width / grid : Number(c.dataset.cell);
           const h = grid ? c.height / grid : w;
           const p = c.getContext("2d").getImageData((j + 0.5) * w, (i + 0.5) * h, 1, 1);
           return Array.from(p.data.slice(0, 3)); }""",
        [side, i, j, grid],
    )


def open_compare(page, tmp_path, a: Seen, b: Seen) -> None:
    """The compare page of A ("before") and B ("after"), once it is drawn."""
    path = tmp_path / "compare.html"
    path.write_text(a.compare(b, names=("before", "after")).page())
    page.goto(path.as_uri())
    page.wait_for_selector("#app[data-mode=compare][data-state=done]")


def test_the_compare_page_draws_a_b_and_a_diverging_difference(page, tmp_path):
    a, b = two_seens()
    open_compare(page, tmp_path, a, b)
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


GREY = 200  # the image's pixels: the maps are drawn over it at opacity 0.6 (compare.js ALPHA)


def image_seens() -> tuple[Seen, Seen]:
    """Two 2 x 2 maps over one grey 8 x 8 image: B - A is +0.3 at cell (0, 0), 0 at (0, 1) and
    (1, 0), -0.3 at (1, 1) for head 0; head 1's difference is 0.1 at (1, 0) only."""
    a0, b0 = torch.tensor([[0.1, 0.2], [0.3, 0.4]]), torch.tensor([[0.4, 0.2], [0.3, 0.1]])
    a1 = torch.full((2, 2), 0.25)
    b1 = a1 + torch.tensor([[0.0, 0.0], [0.1, 0.0]])
    image = torch.full((1, 8, 8), GREY, dtype=torch.uint8)

    def seen(h0: torch.Tensor, h1: torch.Tensor) -> Seen:
        group = MapGroup("layer 0", [("head 0", h0), ("head 1", h1)])
        return Seen({"summary": "s"}, [ImageView("vit", "vit", image, [group])])

    return seen(a0, a1), seen(b0, b1)


def image_pixel(page, side: str, r: int, c: int) -> list[int]:
    return pixel(page, side, r, c, grid=2)  # the 2 x 2 maps of image_seens


def test_the_compare_page_draws_two_image_maps_and_their_difference(page, tmp_path):
    a, b = image_seens()
    open_compare(page, tmp_path, a, b)
    pair = page.locator(".compare-pair[data-view-id=vit][data-view-type=image]")
    for side in ("a", "b", "diff"):
        pair.locator(f"canvas[data-side={side}][data-loaded=true]").wait_for()
    assert (pair.get_attribute("data-group"), pair.get_attribute("data-map")) == (
        "layer 0",
        "head 0",
    )
    # A's lowest weight is the scale's lowest colour (black): what shows is the image under it.
    low = image_pixel(page, "a", 0, 0)
    assert all(abs(v - 0.4 * GREY) <= 4 for v in low), f"the image must show under A, got {low}"
    assert sum(image_pixel(page, "b", 0, 0)) > sum(low) + 200  # B's highest weight there
    diff = pair.locator("canvas[data-side=diff]")
    assert float(diff.get_attribute("data-max-abs")) == pytest.approx(0.3)
    up, same, down = (image_pixel(page, "diff", r, c) for r, c in ((0, 0), (0, 1), (1, 1)))
    assert up[0] > up[2] + 50, f"B > A must be red, got {up}"
    assert down[2] > down[0] + 50, f"B < A must be blue, got {down}"
    assert min(same) > 0.6 * 240 + 0.4 * GREY - 4, f"B = A must be white, got {same}"
    # the map selector drives all three: head 1 differs at (1, 0) only
    pair.locator(".map-select").select_option("1")
    assert pair.get_attribute("data-map") == "head 1"
    assert float(diff.get_attribute("data-max-abs")) == pytest.approx(0.1)
    assert min(image_pixel(page, "diff", 0, 0)) > 0.6 * 240 + 0.4 * GREY - 4
    moved = image_pixel(page, "diff", 1, 0)
    assert moved[0] > moved[2] + 50

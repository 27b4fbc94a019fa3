"""One view, one figure: the matrix drawn is the chosen layer's chosen head (or the mean of its
heads, read back from the figure), the title names the view, the layer and the head, the axes
are the view's, long axes get smaller tick labels, and a layer or head out of range is refused
naming the range."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qkv.viz.attention_views import image_view_figure, token_view_figure
from qkv.viz.heatmap import tick_font_size
from qkv.viz.image_attention import upsample_map

KEYS, QUERIES = ["a", "b", "c"], ["x", "y"]
# two layers of (H=3, Tq=2, Tk=3) rows summing to one, every head and layer different
LAYERS = [torch.softmax(torch.randn(3, 2, 3, generator=torch.Generator().manual_seed(s)), -1)
          for s in (0, 1)]  # fmt: skip


def _drawn(figure) -> np.ndarray:
    (image,) = figure.axes[0].get_images()
    return np.asarray(image.get_array())


def _token(layer=None, head=None):
    return token_view_figure(LAYERS, KEYS, QUERIES, name="cross-attention",
                             axis_labels=("source", "target"), layer=layer, head=head)  # fmt: skip


@pytest.mark.parametrize(
    ("layer", "head", "weights", "title"),
    [
        (None, None, LAYERS[1].mean(0), "cross-attention, layer 1, mean of 3 heads"),
        (0, None, LAYERS[0].mean(0), "cross-attention, layer 0, mean of 3 heads"),
        (0, 2, LAYERS[0][2], "cross-attention, layer 0, head 2"),
        (-2, -1, LAYERS[0][2], "cross-attention, layer 0, head 2"),
        (None, 1, LAYERS[1][1], "cross-attention, layer 1, head 1"),
    ],
)
def test_a_token_view_draws_the_chosen_layer_and_head_under_a_title_naming_them(
    layer, head, weights, title
):
    figure = _token(layer, head)
    np.testing.assert_allclose(_drawn(figure), weights.numpy(), rtol=0, atol=1e-7)
    axes = figure.axes[0]
    assert axes.get_title() == title
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("source", "target")
    assert [t.get_text() for t in axes.get_xticklabels()] == KEYS
    assert {t.get_rotation() for t in axes.get_xticklabels()} == {90.0}  # keys read upwards
    assert len(figure.axes) == 2 and axes.get_images()[0].colorbar is not None


def test_one_head_is_not_called_a_mean():
    figure = token_view_figure([LAYERS[0][:1]], KEYS, QUERIES, name="alignment",
                               axis_labels=("source", "target"))  # fmt: skip
    assert figure.axes[0].get_title() == "alignment, layer 0, its one head"


@pytest.mark.parametrize(
    ("layer", "head", "message"),
    [
        (2, None, r"layer 2 is out of range: cross-attention has 2 layers; pass 0 to 1 \(or -2"),
        (-3, None, r"layer -3 is out of range: .* 2 layers"),
        (0, 3, r"head 3 is out of range: cross-attention, layer 0, has 3 heads; pass 0 to 2"),
    ],
)
def test_a_layer_or_head_out_of_range_is_refused_naming_the_range(layer, head, message):
    with pytest.raises(ValueError, match=message):
        _token(layer, head)


def test_an_index_that_is_not_an_int_is_refused():
    with pytest.raises(TypeError, match=r"layer must be an int or None, got 1.0"):
        _token(1.0)
    with pytest.raises(TypeError, match=r"head must be an int or None, got True"):
        _token(0, True)


def test_tick_labels_shrink_as_the_axis_grows_and_stay_readable():
    sizes = [tick_font_size(n) for n in (1, 10, 30, 60, 150, 1000)]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 9.0 and sizes[-1] == 5.0
    tokens = [f"t{i}" for i in range(60)]
    figure = token_view_figure([torch.full((1, 2, 60), 1 / 60)], tokens, QUERIES, name="v",
                               axis_labels=("key", "query"))  # fmt: skip
    axes = figure.axes[0]
    assert {t.get_fontsize() for t in axes.get_xticklabels()} == {tick_font_size(60)}
    assert {t.get_fontsize() for t in axes.get_yticklabels()} == {tick_font_size(2)}


# A ViT-like layered view over an 8 x 8 image with a 2 x 2 grid: group 0 the rollout, then per
# layer the head mean and two heads; every map different.
GRIDS = torch.arange(1.0, 1 + 7 * 4).view(7, 2, 2) / 28
IMAGE = torch.arange(64, dtype=torch.uint8).view(1, 8, 8)
GROUPS = [("rollout", [("rollout", GRIDS[0])])] + [
    (f"layer {lay}", [("head mean", GRIDS[1 + 3 * lay]), ("head 0", GRIDS[2 + 3 * lay]),
                      ("head 1", GRIDS[3 + 3 * lay])])
    for lay in range(2)
]  # fmt: skip


def _overlay(figure) -> np.ndarray:
    """The map laid over the image in the figure's one map panel (its second image)."""
    panel = [axes for axes in figure.axes if len(axes.get_images()) == 2]
    (axes,) = panel
    return np.asarray(axes.get_images()[1].get_array())


@pytest.mark.parametrize(
    ("layer", "head", "grid", "title"),
    [
        (None, None, GRIDS[4], "vit, layer 1, mean of 2 heads"),
        (0, 1, GRIDS[3], "vit, layer 0, head 1"),
    ],
)
def test_a_layered_image_view_draws_the_chosen_map(layer, head, grid, title):
    figure = image_view_figure(IMAGE, GROUPS, name="vit", layered=True, layer=layer, head=head)
    expected = upsample_map(grid, 8, 8) / grid.max()
    np.testing.assert_allclose(_overlay(figure), expected.numpy(), rtol=0, atol=1e-7)
    assert figure.get_suptitle() == title
    assert any(axes.get_label() == "<colorbar>" for axes in figure.axes)


def test_image_view_refusals_name_what_there_is():
    with pytest.raises(ValueError, match=r"head 2 is out of range: vit, layer 1, has 2 heads"):
        image_view_figure(IMAGE, GROUPS, name="vit", layered=True, head=2)
    with pytest.raises(ValueError, match=r"layer 2 is out of range: vit has 2 layers"):
        image_view_figure(IMAGE, GROUPS, name="vit", layered=True, layer=2)
    words = [("words", [("0: one", GRIDS[0]), ("1: two", GRIDS[1])])]
    with pytest.raises(ValueError, match=r"caption has no layers or heads .* pass layer=None"):
        image_view_figure(IMAGE, words, name="caption", layered=False, layer=0)
    figure = image_view_figure(IMAGE, words, name="caption", layered=False)
    titles = [axes.get_title() for axes in figure.axes]
    assert "0: one (max 0.14)" in titles and "1: two (max 0.29)" in titles  # 4/28, 8/28

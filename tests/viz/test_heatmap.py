"""Heatmaps draw what they are given: the values of a non-symmetric matrix read back from the
figure, queries down the rows and keys along the top (in order, first query at the top), a
colour bar, titles naming the layer and each head; the file is written whole."""

import numpy as np
import pytest
import torch

from qkv.viz.heatmap import alignment_figure, heads_figure, plot_alignment, plot_heads

# (T=2, S=3): neither symmetric nor square, so a transpose or a flip changes what is drawn.
WEIGHTS = torch.tensor([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
KEYS, QUERIES = ["a", "b", "c"], ["x", "y"]


def _labels(ticks) -> list[str]:
    return [tick.get_text() for tick in ticks]


def _check_heatmap(axes, weights: torch.Tensor) -> None:
    """One heatmap axes: its pixels are ``weights``, rows are the queries (first at the top),
    columns the keys (labels along the top), values on a fixed 0-1 scale."""
    (image,) = axes.get_images()
    np.testing.assert_array_equal(np.asarray(image.get_array()), weights.numpy())
    assert image.get_clim() == (0.0, 1.0)
    assert _labels(axes.get_xticklabels()) == KEYS and list(axes.get_xticks()) == [0, 1, 2]
    assert _labels(axes.get_yticklabels()) == QUERIES and list(axes.get_yticks()) == [0, 1]
    assert image.origin == "upper" and axes.get_ylim() == (1.5, -0.5)  # row 0 drawn at the top
    assert axes.xaxis.get_ticks_position() == "top"


def test_alignment_draws_the_matrix_with_queries_down_and_keys_across():
    figure = alignment_figure(
        WEIGHTS, KEYS, QUERIES, title="layer 1: x y", axis_labels=("key", "query")
    )
    axes = figure.axes[0]
    _check_heatmap(axes, WEIGHTS)
    assert axes.get_title() == "layer 1: x y"
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("key", "query")
    (image,) = axes.get_images()
    assert image.colorbar is not None and len(figure.axes) == 2  # the heatmap and its colour bar
    assert figure.axes[1] is image.colorbar.ax


def test_heads_grid_draws_each_head_in_order_under_its_title():
    weights = torch.stack([WEIGHTS, WEIGHTS.flip(1), WEIGHTS * 0.5])  # (H=3, T, S), all different
    figure = heads_figure(weights, KEYS, QUERIES, title="layer 2: x y")
    assert [axes.get_title() for axes in figure.axes] == ["head 0", "head 1", "head 2"]
    for h, axes in enumerate(figure.axes):
        _check_heatmap(axes, weights[h])
    assert figure.get_suptitle() == "layer 2: x y"


def test_files_are_written_whole(tmp_path):
    import matplotlib.image as mpimg

    path = plot_alignment(WEIGHTS, KEYS, QUERIES, tmp_path / "a.png")
    assert mpimg.imread(path).ndim == 3
    heads = plot_heads(WEIGHTS[None].expand(6, 2, 3), KEYS, QUERIES, tmp_path / "h.svg")
    assert heads.read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "h.svg"]  # no temporary left


def test_errors_name_the_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"\(3, 3\).*2 target tokens x 3 source tokens"):
        plot_alignment(torch.eye(3), ["a", "b", "c"], ["x", "y"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="must end in"):
        plot_alignment(torch.eye(1), ["a"], ["x"], tmp_path / "a.jpg")
    with pytest.raises(ValueError, match=r"needs \(H, T, S\) weights, got shape \(2, 3\)"):
        plot_heads(WEIGHTS, KEYS, QUERIES, tmp_path / "h.png")
    assert not list(tmp_path.iterdir())

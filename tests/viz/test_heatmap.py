"""Heatmaps are written as real images whose pixels follow the weights."""

import pytest
import torch

from qkv.viz.heatmap import plot_alignment, plot_heads


def test_alignment_png_is_written_and_reflects_weights(tmp_path):
    import matplotlib.image as mpimg

    weights = torch.eye(3)
    path = plot_alignment(weights, ["a", "b", "c"], ["x", "y", "z"], tmp_path / "a.png")
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100
    other = plot_alignment(weights.flip(0), ["a", "b", "c"], ["x", "y", "z"], tmp_path / "b.png")
    assert path.read_bytes() != other.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half-written left behind


def test_heads_grid(tmp_path):
    path = plot_heads(torch.rand(6, 2, 4).softmax(-1), list("abcd"), ["x", "y"], tmp_path / "h.png")
    assert path.stat().st_size > 1000


def test_errors_name_the_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"\(3, 3\).*2 target tokens x 3 source tokens"):
        plot_alignment(torch.eye(3), ["a", "b", "c"], ["x", "y"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="must end in"):
        plot_alignment(torch.eye(1), ["a"], ["x"], tmp_path / "a.jpg")

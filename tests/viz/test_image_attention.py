"""Attention overlays: maps are scaled to the image patch by patch, the PNG is a real image whose
pixels follow the map, and bad shapes are named."""

from __future__ import annotations

import pytest
import torch

from qkv.viz.image_attention import plot_image_attention, upsample_map


def test_upsample_repeats_each_patch():
    grid = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    pixels = upsample_map(grid, 4, 6)
    assert pixels.shape == (4, 6)
    assert torch.equal(pixels[:2, :3], torch.full((2, 3), 0.1))
    assert torch.equal(pixels[2:, 3:], torch.full((2, 3), 0.4))


def test_overlay_png_follows_the_map(tmp_path):
    import matplotlib.image as mpimg

    image = torch.randint(0, 256, (1, 28, 28), dtype=torch.uint8)
    left = torch.zeros(1, 7, 7)
    left[0, :, 0] = 1.0
    right = left.flip(-1)
    a = plot_image_attention(image, left, ["left"], tmp_path / "a.png")
    b = plot_image_attention(image, right, ["right"], tmp_path / "b.png")
    assert mpimg.imread(a).shape[0] > 100
    assert a.read_bytes() != b.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))


def test_wide_strips_stack_in_one_column(tmp_path):
    import matplotlib.image as mpimg

    strip = torch.rand(1, 28, 112)
    path = plot_image_attention(strip, torch.rand(3, 7, 28), ["a", "b", "c"], tmp_path / "s.png")
    height, width = mpimg.imread(path).shape[:2]
    assert height > width  # four panels (image + 3 words) one above the other


def test_bad_shapes_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"maps must be \(N, grid_h, grid_w\), got \(7, 7\)"):
        plot_image_attention(torch.rand(1, 28, 28), torch.rand(7, 7), ["x"], tmp_path / "x.png")
    with pytest.raises(ValueError, match="2 maps but 1 titles"):
        plot_image_attention(torch.rand(28, 28), torch.rand(2, 7, 7), ["x"], tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"image must be \(H, W\)"):
        plot_image_attention(torch.rand(2, 28, 28), torch.rand(1, 7, 7), ["x"], tmp_path / "x.png")


def test_save_image_round_trips_the_pixels(tmp_path):
    from qkv.data.images.datasets import read_image
    from qkv.viz.image_attention import save_image

    grey = torch.randint(0, 256, (1, 28, 84), dtype=torch.uint8)
    assert torch.equal(read_image(save_image(grey, tmp_path / "g.png"), channels=1), grey)
    colour = torch.randint(0, 256, (3, 5, 7), dtype=torch.uint8)
    assert torch.equal(read_image(save_image(colour, tmp_path / "c.png"), channels=3), colour)
    with pytest.raises(ValueError, match=r"must end in \.png"):
        save_image(grey, tmp_path / "g.jpg")
    with pytest.raises(ValueError, match=r"image must be uint8 \(1 or 3, H, W\)"):
        save_image(grey.float(), tmp_path / "f.png")

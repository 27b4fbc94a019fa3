"""Attention overlays: maps are scaled to the image patch by patch, each panel draws the image
and its map (read back from the figure) under a title naming it, the PNG is written whole, and
bad shapes are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qkv.viz.image_attention import image_attention_figure, plot_image_attention, upsample_map


def test_upsample_repeats_each_patch():
    grid = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    pixels = upsample_map(grid, 4, 6)
    assert pixels.shape == (4, 6)
    assert torch.equal(pixels[:2, :3], torch.full((2, 3), 0.1))
    assert torch.equal(pixels[2:, 3:], torch.full((2, 3), 0.4))


def _patches(grid: torch.Tensor, size: int) -> torch.Tensor:
    """An independent nearest-neighbour upsampling: each cell repeated ``size`` x ``size``."""
    return grid.repeat_interleave(size, 0).repeat_interleave(size, 1)


def test_overlay_figure_draws_the_image_then_each_map_scaled_to_its_maximum():
    image = torch.rand(28, 28)  # float in [0, 1]: drawn as given
    corner = torch.zeros(7, 7)
    corner[0, 6] = 0.5  # top right only: a transpose moves it to the bottom left
    ramp = torch.arange(49.0).view(7, 7) / 49  # rows and columns differ everywhere
    figure = image_attention_figure(
        image, torch.stack([corner, ramp]), ["layer 0 head 1", "rollout"], title="seven"
    )
    assert figure.get_suptitle() == "seven"
    first, second, third, empty = figure.axes  # a 2 x 2 grid for three panels
    assert [a.get_title() for a in (first, second, third)] == [
        "image",
        "layer 0 head 1 (max 0.50)",
        f"rollout (max {48 / 49:.2f})",
    ]
    assert not empty.get_images()
    (plain,) = first.get_images()
    np.testing.assert_array_equal(np.asarray(plain.get_array()), image.numpy())
    for axes, grid in ((second, corner), (third, ramp)):
        under, over = axes.get_images()
        np.testing.assert_array_equal(np.asarray(under.get_array()), image.numpy())
        expected = _patches(grid / grid.max(), 4)  # each panel scaled to its own maximum
        np.testing.assert_allclose(np.asarray(over.get_array()), expected.numpy(), rtol=1e-6)
        assert over.get_alpha() == 0.55 and over.get_clim() == (0.0, 1.0)


def test_overlay_png_is_written_whole(tmp_path):
    import matplotlib.image as mpimg

    image = torch.randint(0, 256, (1, 28, 28), dtype=torch.uint8)
    left = torch.zeros(1, 7, 7)
    left[0, :, 0] = 1.0
    a = plot_image_attention(image, left, ["left"], tmp_path / "a.png")
    assert mpimg.imread(a).shape[0] > 100
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"]  # no temporary left behind


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

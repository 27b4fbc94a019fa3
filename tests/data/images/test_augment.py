"""Augmentation of small images: a shift moves every pixel by the drawn offset (checked against a
per-image loop with explicit indexing), never invents a pixel, is reproducible from its
generator, and a flip mirrors exactly half of the images on average."""

from __future__ import annotations

import pytest
import torch

from qkv.data.images.augment import augment, random_flip, random_shift

pytestmark = pytest.mark.usefixtures("one_thread")


def _shift_reference(image: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """``image`` (C, H, W) moved down by ``dy`` and right by ``dx``, zeros where uncovered."""
    _, h, w = image.shape
    out = torch.zeros_like(image)
    for y in range(h):
        for x in range(w):
            sy, sx = y - dy, x - dx
            if 0 <= sy < h and 0 <= sx < w:
                out[:, y, x] = image[:, sy, sx]
    return out


def test_shift_moves_each_image_by_some_offset_within_the_limit():
    images = torch.randint(1, 256, (12, 2, 7, 9), dtype=torch.uint8)  # no zero pixels
    shifted = random_shift(images, 2, torch.Generator().manual_seed(3))
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    offsets = set()
    for image, out in zip(images, shifted, strict=True):
        matches = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(out, _shift_reference(image, dy, dx))
        ]
        assert len(matches) == 1  # exactly one offset explains the output
        offsets.add(matches[0])
    assert len(offsets) > 3  # offsets differ between images


def test_shift_is_reproducible_and_zero_shift_is_identity():
    images = torch.randint(0, 256, (5, 1, 6, 6), dtype=torch.uint8)
    a = random_shift(images, 3, torch.Generator().manual_seed(1))
    b = random_shift(images, 3, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert torch.equal(random_shift(images, 0, torch.Generator()), images)
    with pytest.raises(ValueError, match="max_shift must be >= 0, got -1"):
        random_shift(images, -1, torch.Generator())


def test_flip_mirrors_about_half():
    images = torch.arange(400 * 3, dtype=torch.float32).reshape(400, 1, 1, 3)
    flipped = random_flip(images, torch.Generator().manual_seed(0))
    mirrored = (flipped == images.flip(-1)).all(-1).flatten()
    kept = (flipped == images).all(-1).flatten()
    assert bool((mirrored ^ kept).all())  # each image is either mirrored or untouched
    assert 160 < int(mirrored.sum()) < 240


def test_augment_names_its_kinds():
    images = torch.zeros(2, 1, 4, 4, dtype=torch.uint8)
    assert augment(images, "none", 2, torch.Generator()) is images
    with pytest.raises(ValueError, match="none, shift or shift_flip, got 'rotate'"):
        augment(images, "rotate", 2, torch.Generator())

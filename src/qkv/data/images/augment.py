"""Data augmentation for small images (28 x 28 digits and clothes, 8 x 8 digits).

Small images leave little room: a crop of a 28 x 28 digit cuts strokes, and colour jitter means
nothing for grey pixels. Two transforms suit them:

- **shift** (the "random crop with padding" of CIFAR training recipes, Krizhevsky et al. 2012;
  He et al. 2016): pad by ``m`` pixels with the background (zero), then cut a window of the
  original size at a uniformly random offset, i.e. move the picture by ``dy, dx`` in
  ``[-m, m]``. The label cannot change: nothing of the object is lost when ``m`` is smaller
  than its margin.
- **flip**: mirror left-right with probability 1/2. Right for clothes (a mirrored shoe is a
  shoe), wrong for digits (a mirrored 2 is not a 2), so it is asked for by name.

Both run on ``uint8`` batches ``(B, C, H, W)`` and draw from a ``torch.Generator``, so a resumed
run sees the same augmented images.
"""

from __future__ import annotations

import torch
from torch import Tensor


def random_shift(images: Tensor, max_shift: int, generator: torch.Generator) -> Tensor:
    """Each image moved by its own random ``(dy, dx)`` in ``[-max_shift, max_shift]``, the
    uncovered border filled with zeros; ``(B, C, H, W)`` in, same shape and dtype out."""
    if max_shift < 0:
        raise ValueError(f"max_shift must be >= 0, got {max_shift}")
    if images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    if max_shift == 0 or images.size(0) == 0:
        return images.clone()
    b, _, h, w = images.shape
    m = max_shift
    padded = torch.nn.functional.pad(images, (m, m, m, m))  # (B, C, H + 2m, W + 2m)
    # Window origins in the padded image: 0..2m; origin m is the unmoved image.
    top = torch.randint(0, 2 * m + 1, (b,), generator=generator)
    left = torch.randint(0, 2 * m + 1, (b,), generator=generator)
    rows = top[:, None] + torch.arange(h)  # (B, H)
    cols = left[:, None] + torch.arange(w)  # (B, W)
    batch = torch.arange(b)[:, None, None]
    # (B, H, W, C) gathered per image, then back to (B, C, H, W).
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def random_flip(images: Tensor, generator: torch.Generator) -> Tensor:
    """Each image mirrored left-right with probability 1/2; ``(B, C, H, W)``."""
    if images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    flip = torch.rand(images.size(0), generator=generator) < 0.5  # (B,)
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


# Each augmentation by name: the transforms it applies, in order (each draws from the generator).
AUGMENTATIONS: dict[str, tuple[str, ...]] = {
    "none": (),
    "shift": ("shift",),
    "shift_flip": ("shift", "flip"),
}


def augment(images: Tensor, kind: str, max_shift: int, generator: torch.Generator) -> Tensor:
    """``kind``: one of :data:`AUGMENTATIONS` (``none``, ``shift``, ``shift_flip``; see the
    module doc)."""
    if kind not in AUGMENTATIONS:
        raise ValueError(f"augmentation must be none, shift or shift_flip, got {kind!r}")
    transforms = {
        "shift": lambda batch: random_shift(batch, max_shift, generator),
        "flip": lambda batch: random_flip(batch, generator),
    }
    for name in AUGMENTATIONS[kind]:
        images = transforms[name](images)
    return images

"""The ``data:`` section of an image classification run (the image data set, augmentation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import choice, ranged
from qkv.data.images.augment import AUGMENTATIONS


@dataclass(frozen=True)
class ImageDataConfig:
    """An image classifier's data: an image data set, how training images are augmented and how
    many go in a batch.

    ``corpus``: fashion_mnist, mnist_5k, digits, or folder (``options: {path: DIR, size: 32}``).
    ``augment``: ``none``; ``shift`` (each training image moved by up to ``max_shift`` pixels
    in each direction, the border filled with zeros, the background of these data sets);
    ``shift_flip`` (also mirrored left-right half of the time: right for clothes, wrong for
    digits)."""

    corpus: str = "fashion_mnist"
    options: dict[str, Any] = field(default_factory=dict)
    augment: str = choice("shift", AUGMENTATIONS)
    max_shift: int = ranged(2, ">= 0")
    # training images per batch (train.batch_tokens does not apply)
    batch_size: int = ranged(128, ">= 1")

    def __post_init__(self) -> None:
        if self.augment not in AUGMENTATIONS:
            raise ValueError(
                f"data.augment must be one of {', '.join(AUGMENTATIONS)}, got {self.augment!r}"
            )
        if self.max_shift < 0:
            raise ValueError(f"data.max_shift must be >= 0, got {self.max_shift}")
        if self.batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {self.batch_size}")

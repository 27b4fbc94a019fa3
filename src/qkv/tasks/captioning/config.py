"""The sections of a captioning run: ``data:`` (captioned strips) and ``train:`` (the engine's
settings and the weights of the captioning loss, Xu et al. 2015 eq. 12 and 14)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import ranged
from qkv.training.trainer import TrainConfig


@dataclass(frozen=True)
class CaptionDataConfig:
    """A captioner's data: strips of ``min_tiles``-``max_tiles`` images of an image data set
    side by side, captioned with their class names in order.

    Training strips are drawn afresh from the training images every epoch
    (``train_strips`` per epoch); validation and test strips are drawn once, with fixed seeds,
    from the held-out images only."""

    corpus: str = "mnist_5k"
    options: dict[str, Any] = field(default_factory=dict)
    min_tiles: int = ranged(2, ">= 1")
    max_tiles: int = ranged(4, ">= min_tiles")
    train_strips: int = ranged(20_000, ">= 1")
    valid_strips: int = ranged(500, ">= 1")
    test_strips: int = ranged(1_000, ">= 1")
    # each training tile moved by up to this many pixels (0: no augmentation)
    max_shift: int = ranged(2, ">= 0")
    # training strips per batch (train.batch_tokens does not apply)
    batch_size: int = ranged(64, ">= 1")

    def __post_init__(self) -> None:
        if not 1 <= self.min_tiles <= self.max_tiles:
            raise ValueError(
                f"data needs 1 <= min_tiles <= max_tiles, got {self.min_tiles}, {self.max_tiles}"
            )
        for name in ("train_strips", "valid_strips", "test_strips", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_shift < 0:
            raise ValueError(f"data.max_shift must be >= 0, got {self.max_shift}")


OBJECTIVE_WEIGHTS = ("doubly_stochastic", "reinforce_weight", "entropy_weight")


@dataclass(frozen=True)
class CaptionTrainConfig(TrainConfig):
    """The ``train:`` section of a captioning run: the engine's settings and the weights of the
    captioning loss (module docstring).

    Args:
        doubly_stochastic: ``lambda`` of the soft model's penalty ``sum_i (1 - sum_t
            alpha_ti)^2`` (eq. 14).
        reinforce_weight: ``lambda_r`` of the hard model's REINFORCE term (eq. 12).
        entropy_weight: ``lambda_e`` of the hard model's entropy bonus (eq. 12).
    """

    doubly_stochastic: float = ranged(1.0, ">= 0")
    reinforce_weight: float = ranged(1.0, ">= 0")
    entropy_weight: float = ranged(0.01, ">= 0")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in OBJECTIVE_WEIGHTS:
            if not getattr(self, name) >= 0:
                raise ValueError(f"train.{name} must be >= 0, got {getattr(self, name)!r}")

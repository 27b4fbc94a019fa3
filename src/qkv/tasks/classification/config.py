"""The sections of a classification run: ``data:`` (the labelled corpus) and ``train:`` (the
engine's settings and the weight of Lin et al.'s penalty)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from qkv.config_values import ranged
from qkv.tasks.sections import EncoderDataConfig
from qkv.training.trainer import TrainConfig


@dataclass(frozen=True)
class ClassificationDataConfig(EncoderDataConfig):
    """A classifier's data: an :class:`EncoderDataConfig` and ``valid_examples``, how many of
    the validation texts (the first ones) each evaluation scores; ``None`` (the default): all.
    Fewer make quick runs quicker; the best weights are then picked on those alone."""

    corpus: str = "rotten_tomatoes"  # rotten_tomatoes, pang_lee, or file (options: {path: ...})
    valid_examples: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        n = self.valid_examples
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"data.valid_examples must be a positive int or null (all), got {n!r}")


PAPER_PENALTY_WEIGHT = 1.0


@dataclass(frozen=True)
class ClassificationTrainConfig(TrainConfig):
    """A classifier's ``train:`` section: the engine's settings and the weight of its loss's
    penalty.

    ``penalty_weight``: the coefficient of Lin et al.'s structured self-attention penalty
    ``||A A^T - I||_F^2`` in the loss (only structured pooling returns one, so it weighs
    nothing beside the other poolings); ``None`` (the default): the paper's
    :data:`PAPER_PENALTY_WEIGHT`, with which the ``bilstm-attention`` preset trains. A run
    saved when the weight was a model setting (``model.penalty_weight``) loads with it here.
    """

    penalty_weight: float | None = ranged(None, "null or >= 0")

    def __post_init__(self) -> None:
        super().__post_init__()
        weight = self.penalty_weight
        if weight is not None and (
            not isinstance(weight, int | float) or not (math.isfinite(weight) and weight >= 0)
        ):
            raise ValueError(
                f"train.penalty_weight must be a finite number >= 0 (null: the paper's "
                f"{PAPER_PENALTY_WEIGHT:g}), got {weight!r}"
            )

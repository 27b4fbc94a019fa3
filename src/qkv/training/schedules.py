"""Learning-rate schedules, as multipliers of the base learning rate for ``LambdaLR``.

* ``inverse_sqrt``: Vaswani et al. 2017, eq. (3): ``d_model^-0.5 * min(step^-0.5, step *
  warmup^-1.5)``; here normalised to peak at 1.0 after ``warmup`` steps, so the configured learning
  rate is the peak (the paper's peak for d_model 512 and 4000 warm-up steps is 7e-4).
* ``cosine``: linear warm-up, then cosine decay to ``min_ratio`` at ``total`` steps.
* ``constant``: linear warm-up (if any), then constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable

SCHEDULES = ("inverse_sqrt", "cosine", "constant")


def lr_multiplier(
    name: str, *, warmup: int, total: int | None = None, min_ratio: float = 0.0
) -> Callable[[int], float]:
    """``f(step) -> multiplier`` for ``torch.optim.lr_scheduler.LambdaLR`` (step counts from 0)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; expected one of {', '.join(SCHEDULES)}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if name == "cosine" and (total is None or total <= warmup):
        raise ValueError(f"cosine needs total steps > warmup={warmup}, got total={total}")

    def warm(step: int) -> float:
        return (step + 1) / warmup if warmup and step < warmup else 1.0

    if name == "constant":
        return warm
    if name == "inverse_sqrt":
        return lambda step: warm(step) if step < warmup else math.sqrt(max(warmup, 1) / (step + 1))
    assert total is not None  # cosine: checked above

    def cosine(step: int) -> float:
        if step < warmup:
            return warm(step)
        progress = min(1.0, (step - warmup) / (total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return cosine

"""Training: the engine that every task's run goes through, and nothing of any task.

:func:`train` runs the loop (:class:`TrainingLoop`: steps, gradient accumulation, clipping,
evaluation, best weights, snapshots, checkpoints and exact resume, budgets in steps or CPU time,
SIGINT/SIGTERM) over a model, a ``loss_fn``, an epoch-indexed batch source and an ``evaluate``
callback; :class:`TrainConfig` is the ``train:`` section; :func:`sequence_cross_entropy` the
token loss; :mod:`~qkv.training.checkpoint` the weights on disk (safetensors); and
:class:`Distributed` a process's place under torchrun. Each name is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qkv.lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers and editors only
    from qkv.training.checkpoint import CheckpointError, load_weights, save_weights  # noqa: F401
    from qkv.training.config import TrainConfig, TrainResult  # noqa: F401
    from qkv.training.distributed import Distributed  # noqa: F401
    from qkv.training.losses import sequence_cross_entropy  # noqa: F401
    from qkv.training.trainer import TrainingLoop, train  # noqa: F401

_EXPORTS = {
    "CheckpointError": "qkv.training.checkpoint",
    "Distributed": "qkv.training.distributed",
    "TrainConfig": "qkv.training.config",
    "TrainResult": "qkv.training.config",
    "TrainingLoop": "qkv.training.trainer",
    "load_weights": "qkv.training.checkpoint",
    "save_weights": "qkv.training.checkpoint",
    "sequence_cross_entropy": "qkv.training.losses",
    "train": "qkv.training.trainer",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

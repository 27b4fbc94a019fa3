"""What the training engine is told and what it reports: :class:`TrainConfig` (the ``train:``
section of a run's YAML), :class:`TrainResult`, and the :class:`BudgetClock` that
``train.max_minutes`` and ``train.snapshot_minutes`` count on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from qkv.config_values import choice, ranged
from qkv.training.schedules import SCHEDULES

# Budget clocks: wall time, or the CPU time of this process summed over its threads (a budget
# that other jobs on the machine cannot eat into; with one thread it equals single-core time).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
# adamw (with train.adam_betas) or plain sgd (no momentum: the reading-comprehension papers'
# recipe, e.g. Chen et al. 2016's SGD at lr 0.1 with gradients clipped at norm 10).
OPTIMISERS = ("adamw", "sgd")

# Settings of the ``train:`` section that the task reads, not the engine (see TrainConfig).
TASK_SETTINGS = ("batch_tokens", "label_smoothing")


@dataclass(frozen=True)
class TrainConfig:
    """How to train (not what): optimiser, schedule, budgets, evaluation cadence.

    Two settings are the task's, not the engine's (:data:`TASK_SETTINGS`): ``batch_tokens``
    (tokens per training batch) and ``label_smoothing`` (the ``eps`` of a cross-entropy loss).
    The engine never reads them; a task reads them when it builds the ``batches`` and the
    ``loss_fn`` it hands to :func:`~qkv.training.trainer.train`. They stay in this section
    because the YAML files and every saved run's ``config.json`` hold them under ``train``. A
    task that batches images or strips (``data.batch_size``), or whose loss has no smoothing,
    leaves them unread.
    """

    max_steps: int = ranged(100_000, ">= 1")
    max_minutes: float | None = ranged(None, "> 0")
    # What max_minutes and snapshot_minutes count: "wall" or "cpu" time.
    clock: str = choice("wall", CLOCKS)
    snapshot_minutes: tuple[float, ...] = ()  # hand the weights to on_snapshot at these marks
    batch_tokens: int = ranged(4096, ">= 1")  # read by the task: tokens per training batch
    accumulate: int = ranged(1, ">= 1")  # batches per optimiser step (per process under torchrun)
    device: str = "auto"  # auto (CUDA when present), cpu, cuda, cuda:N
    # fp32; bf16 (autocast, CPU or CUDA); fp16 (autocast + scaler, CUDA).
    precision: str = choice("fp32", PRECISIONS)
    compile: bool = False  # torch.compile the model for the training steps
    optimizer: str = choice("adamw", OPTIMISERS)
    lr: float = ranged(7e-4, "> 0")
    # The parameters outside the model's `encoder` (a tagger's or classifier's head: its output
    # layer, casing embedding, CRF) learn at head_lr; null: at lr. A pretrained encoder is
    # fine-tuned at a small lr while the new head, zeros or random at step 0, needs a larger one.
    head_lr: float | None = ranged(None, "> 0")
    schedule: str = choice("inverse_sqrt", SCHEDULES)
    warmup_steps: int = ranged(4000, ">= 0")
    weight_decay: float = ranged(0.0, ">= 0")
    adam_betas: tuple[float, float] = (0.9, 0.98)
    clip_norm: float | None = ranged(1.0, "> 0")
    # Read by the task: eps of its cross-entropy loss_fn.
    label_smoothing: float = ranged(0.1, "[0, 1)")
    eval_every: int = ranged(1000, ">= 1")
    # Steps; also at the end. None: only when a signal stops the run, and at the end of a
    # resumed one.
    checkpoint_every: int | None = ranged(1000, ">= 1")
    keep_checkpoints: int = ranged(1, ">= 1")
    patience: int | None = ranged(None, ">= 1")
    seed: int = 0
    log_every: int = ranged(50, ">= 1")
    tensorboard: bool | None = None  # metrics also to RUN_DIR/tensorboard; None: when installed

    def __post_init__(self) -> None:
        checks = {
            "max_steps": self.max_steps >= 1,
            "batch_tokens": self.batch_tokens >= 1,
            "accumulate": self.accumulate >= 1,
            "lr": self.lr > 0,
            "warmup_steps": self.warmup_steps >= 0,
            "weight_decay": self.weight_decay >= 0,
            "label_smoothing": 0 <= self.label_smoothing < 1,
            "eval_every": self.eval_every >= 1,
            "keep_checkpoints": self.keep_checkpoints >= 1,
            "log_every": self.log_every >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"train.{name} has an invalid value {getattr(self, name)!r}")
        if self.head_lr is not None and not self.head_lr > 0:
            raise ValueError(f"train.head_lr must be positive or null, got {self.head_lr!r}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"train.max_minutes must be positive, got {self.max_minutes}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"train.schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}"
            )
        if self.schedule == "cosine" and self.max_steps <= self.warmup_steps:
            raise ValueError(
                f"train.schedule cosine decays over train.max_steps={self.max_steps}, which must "
                f"exceed train.warmup_steps={self.warmup_steps}"
            )
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(f"train.clip_norm must be positive or null, got {self.clip_norm}")
        if self.checkpoint_every is not None and self.checkpoint_every < 1:
            raise ValueError(
                f"train.checkpoint_every must be >= 1 or null, got {self.checkpoint_every}"
            )
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"train.patience must be >= 1 or null, got {self.patience}")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"train.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.device != "auto" and not (
            self.device == "cpu" or self.device == "cuda" or self.device.startswith("cuda:")
        ):
            raise ValueError(f"train.device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.optimizer not in OPTIMISERS:
            raise ValueError(
                f"train.optimizer must be one of {', '.join(OPTIMISERS)}, got {self.optimizer!r}"
            )
        if self.clock not in CLOCKS:
            raise ValueError(f"train.clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        marks = tuple(float(m) for m in self.snapshot_minutes)
        if any(not math.isfinite(m) or m <= 0 for m in marks):
            raise ValueError(f"train.snapshot_minutes must be positive, got {list(marks)}")
        object.__setattr__(self, "snapshot_minutes", tuple(sorted(marks)))
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))


@dataclass
class TrainResult:
    """How a run ended: its step, why it stopped, the best metrics and every metrics row."""

    steps: int
    seconds: float  # wall time
    stopped: str  # "max_steps" | "max_minutes" | "early_stopping" | "interrupted"
    best: dict[str, float] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    clock_seconds: float = 0.0  # the budget clock at the end (config.clock), resumed runs included
    signal: str | None = None  # "SIGINT" or "SIGTERM" when a signal stopped the run
    checkpoint: Path | None = None  # the checkpoint saved when the run stopped, if one was


class BudgetClock:
    """The ``train.clock`` seconds a run has spent, a resumed run's earlier ones included; its
    ``train.max_minutes`` deadline and the ``train.snapshot_minutes`` marks not yet passed.

    Every :meth:`seconds` reads the clock once (tests drive it with a clock that ticks per read).
    """

    def __init__(
        self, config: TrainConfig, spent: float = 0.0, marks_done: Iterable[float] = ()
    ) -> None:
        self.read = CLOCKS[config.clock]
        self.start = self.read() - spent
        self.deadline = None if config.max_minutes is None else 60 * config.max_minutes
        done = set(marks_done)
        self.pending = [m for m in config.snapshot_minutes if m not in done]

    def seconds(self) -> float:
        return self.read() - self.start

    def marks_passed(self, seconds: float) -> list[float]:
        """The snapshot marks (minutes) that ``seconds`` passes for the first time, in order."""
        passed = []
        while self.pending and seconds >= 60 * self.pending[0]:
            passed.append(self.pending.pop(0))
        return passed

    def expired(self, seconds: float) -> bool:
        return self.deadline is not None and seconds >= self.deadline

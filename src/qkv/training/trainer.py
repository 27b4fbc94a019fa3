"""The training engine every qkv model trains through.

One loop, parameterised by what differs between tasks: a ``loss_fn(model, batch) -> (loss_sum,
n_tokens)``, an epoch-indexed batch source, and an optional ``evaluate()`` returning metrics.
It owns the optimiser (AdamW, no weight decay on biases, norms and embeddings), the learning-rate
schedule, gradient clipping, the step and time budgets, early stopping on a validation metric,
the metrics CSV (and TensorBoard), and the progress bar.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from qkv.hardware import warn_if_slow_bfloat16
from qkv.io import remove_stale_temporaries
from qkv.training.checkpoint import CheckpointError
from qkv.training.distributed import Distributed
from qkv.training.metrics_log import MetricsLog, check_tensorboard
from qkv.training.schedules import SCHEDULES, lr_multiplier
from qkv.training.state import (
    CHECKPOINTS,
    LoopState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

logger = logging.getLogger(__name__)

# Budget clocks: wall time, or the CPU time of this process summed over its threads (a budget
# that other jobs on the machine cannot eat into; with one thread it equals single-core time).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when PyTorch sees a GPU, else the CPU; a CUDA device that is not there is
    an error naming what is."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ValueError(f"train.device={name!r}, but PyTorch sees {count} CUDA device(s)")
    return device


def training_device(config: TrainConfig, distributed: Distributed | None = None) -> torch.device:
    """The device ``config`` trains on, after the checks that need no model and no data (the
    device is there, fp16 runs on CUDA, TensorBoard is installed when asked for). A task calls
    it before it writes anything, so that a rejected setting leaves no files behind."""
    dist_ = distributed or Distributed()
    device = resolve_device(config.device)
    if dist_.world > 1 and device.type == "cuda" and config.device in ("auto", "cuda"):
        device = torch.device("cuda", dist_.local_rank)  # one GPU per process
    if config.precision == "fp16" and device.type != "cuda":
        raise ValueError("train.precision=fp16 needs a CUDA device; use bf16 on the CPU")
    check_tensorboard(config.tensorboard)
    return device


def move_to(batch: Any, device: torch.device) -> Any:
    """A batch on ``device``: anything with ``.to(device)``, or a tuple/list of them."""
    if isinstance(batch, tuple | list):
        return type(batch)(move_to(b, device) for b in batch)
    return batch.to(device) if hasattr(batch, "to") else batch


@dataclass(frozen=True)
class TrainConfig:
    """How to train (not what): optimiser, schedule, budgets, evaluation cadence."""

    max_steps: int = 100_000
    max_minutes: float | None = None
    clock: str = "wall"  # what max_minutes and snapshot_minutes count: "wall" or "cpu" time
    snapshot_minutes: tuple[float, ...] = ()  # hand the weights to on_snapshot at these marks
    batch_tokens: int = 4096
    accumulate: int = 1  # batches per optimiser step (per process under torchrun)
    device: str = "auto"  # auto (CUDA when present), cpu, cuda, cuda:N
    precision: str = "fp32"  # fp32; bf16 (autocast, CPU or CUDA); fp16 (autocast + scaler, CUDA)
    compile: bool = False  # torch.compile the model for the training steps
    lr: float = 7e-4
    schedule: str = "inverse_sqrt"
    warmup_steps: int = 4000
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    clip_norm: float | None = 1.0
    label_smoothing: float = 0.1
    eval_every: int = 1000
    checkpoint_every: int | None = 1000  # steps; also at the end. None: only when a signal
    # stops the run, and at the end of a resumed one
    keep_checkpoints: int = 1
    patience: int | None = None
    seed: int = 0
    log_every: int = 50
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
        if self.clock not in CLOCKS:
            raise ValueError(f"train.clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        marks = tuple(float(m) for m in self.snapshot_minutes)
        if any(not math.isfinite(m) or m <= 0 for m in marks):
            raise ValueError(f"train.snapshot_minutes must be positive, got {list(marks)}")
        object.__setattr__(self, "snapshot_minutes", tuple(sorted(marks)))
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))


@dataclass
class TrainResult:
    steps: int
    seconds: float  # wall time
    stopped: str  # "max_steps" | "max_minutes" | "early_stopping" | "interrupted"
    best: dict[str, float] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    clock_seconds: float = 0.0  # the budget clock at the end (config.clock), resumed runs included
    signal: str | None = None  # "SIGINT" or "SIGTERM" when a signal stopped the run
    checkpoint: Path | None = None  # the checkpoint saved when the run stopped, if one was


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only; none on biases, norms and embeddings."""
    embedding_params = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    decay, no_decay, seen = [], [], set()
    for param in model.parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if param.dim() >= 2 and id(param) not in embedding_params:
            decay.append(param)
        else:
            no_decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def train(
    model: nn.Module,
    *,
    loss_fn: Callable[[nn.Module, Any], tuple[Tensor, Tensor]],
    batches: Callable[[int, int], Iterable[Any]],
    config: TrainConfig,
    evaluate: Callable[[], dict[str, float]] | None = None,
    metric: str = "valid_loss",
    higher_is_better: bool = False,
    on_best: Callable[[dict[str, float]], None] | None = None,
    on_snapshot: Callable[[float, int], None] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    handle_signals: bool = False,
    progress: bool = False,
    count_tokens: Callable[[Any], int] | None = None,
    distributed: Distributed | None = None,
) -> TrainResult:
    """Train ``model`` until a budget runs out, validation stops improving, or a signal.

    Args:
        loss_fn: ``(model, batch) -> (loss_sum, n_tokens)``; the step minimises their ratio.
        batches: ``(epoch, start) -> iterable`` of that epoch's batches after the first
            ``start`` (deterministic per epoch, so a resumed run sees the same data).
        config: :class:`TrainConfig`.
        evaluate: returns metrics including ``metric``; called every ``config.eval_every`` steps
            and at the end (in eval mode, without gradients).
        on_best: called with the metrics whenever ``metric`` improves (e.g. to save the model).
        on_snapshot: called with ``(minutes, step)`` when the budget clock first passes each of
            ``config.snapshot_minutes`` (e.g. to keep the weights after 10, 30 and 60 minutes).
        run_dir: where ``metrics.csv`` and, every ``config.checkpoint_every`` steps and at the
            end, the checkpoints (:mod:`qkv.training.state`) are written. A run stopped by a
            signal, and a resumed run, save one at the end even when ``checkpoint_every`` is
            None.
        resume: continue from the latest checkpoint in ``run_dir`` (weights, optimiser,
            schedule, random generators, data position, clock, best metric, metrics rows and
            the partial metrics window); temporary files that killed saves left are removed.
        handle_signals: on SIGINT/SIGTERM finish the current step, checkpoint and return with
            ``stopped == "interrupted"`` (a second SIGINT stops at once). Main thread only.
        progress: show a progress bar (for command-line use).
        count_tokens: ``batch -> tokens`` its loss is summed over, known before the forward
            pass; needed to normalise a step over several batches (``config.accumulate > 1``)
            or processes, so that the step equals one step on all of them at once.
        distributed: this process's place under torchrun; the model is wrapped in
            ``DistributedDataParallel``, each rank trains on its shard of every epoch, rank 0
            alone evaluates, writes and decides when to stop.
    """
    dist_ = distributed or Distributed()
    if count_tokens is None and (config.accumulate > 1 or dist_.world > 1):
        raise ValueError("accumulating batches or processes needs count_tokens")
    device = training_device(config, dist_)
    if config.precision == "bf16":
        warn_if_slow_bfloat16(device, "train.precision=bf16")
    model.to(device)
    torch.manual_seed(config.seed)
    optimiser = torch.optim.AdamW(
        parameter_groups(model, config.weight_decay), lr=config.lr, betas=config.adam_betas
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lr_multiplier(config.schedule, warmup=config.warmup_steps, total=config.max_steps),
    )
    scaler = torch.amp.GradScaler("cuda", enabled=config.precision == "fp16")
    run_path = Path(run_dir) if run_dir is not None else None
    loop = LoopState()
    if resume:
        if run_path is not None and dist_.main:
            for path in remove_stale_temporaries(run_path):
                logger.info("removed %s, left by a write that was killed", path)
        checkpoint = None if run_path is None else latest_checkpoint(run_path)
        checkpoint = dist_.from_main(checkpoint)  # every rank resumes from rank 0's choice
        if checkpoint is None:
            raise CheckpointError(
                f"nothing to resume: {run_path}/{CHECKPOINTS} holds no complete checkpoint (a "
                "run saves one every train.checkpoint_every steps and when a signal stops it)"
            )
        loop = load_checkpoint(
            checkpoint, model=model, optimiser=optimiser, scheduler=schedule, scaler=scaler
        )
    log = MetricsLog(
        run_path / "metrics.csv" if run_path is not None and dist_.main else None,
        keep_until=loop.step if resume else None,
        tensorboard=config.tensorboard,
    )
    # With a time budget the step count is not known in advance: show rate and elapsed time.
    bar = _progress_bar(
        None if config.max_minutes else config.max_steps, progress and dist_.main, loop.step
    )
    trained: nn.Module = model
    if dist_.world > 1:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None
        )
    if config.compile:
        trained = torch.compile(trained)
    autocast_dtype = PRECISIONS[config.precision]
    clock = CLOCKS[config.clock]
    start, wall_start = clock() - loop.clock_seconds, time.perf_counter()
    window_start = wall_start  # when this process began the metrics window (loop.window_*)
    deadline = None if config.max_minutes is None else 60 * config.max_minutes
    pending_snapshots = [m for m in config.snapshot_minutes if m not in loop.snapshots_done]
    signals = _SignalFlag(enabled=handle_signals)

    def run_evaluation() -> bool:
        """Evaluate, log, track the best; True when patience has run out (rank 0 only)."""
        if evaluate is None or not dist_.main:
            return False
        model.eval()
        with torch.no_grad():
            metrics = evaluate()
        model.train()
        if metric not in metrics:
            raise ValueError(f"evaluate() returned {sorted(metrics)}, without metric {metric!r}")
        value = metrics[metric]
        best = loop.best
        improved = best is None or (
            value > best[metric] if higher_is_better else value < best[metric]
        )
        log.write({"step": loop.step, "epoch": loop.epoch, **metrics})
        if improved:
            loop.best, loop.bad_evaluations = {"step": loop.step, **metrics}, 0
            if on_best is not None:
                on_best(metrics)
        else:
            loop.bad_evaluations += 1
        logger.info("step %d: %s", loop.step, metrics)
        if bar is not None:
            bar.set_postfix_str(f"{metric} {value:.4g}", refresh=False)
        return config.patience is not None and loop.bad_evaluations >= config.patience

    def checkpoint(always: bool = False) -> Path | None:
        """Save a checkpoint when the run has a directory and checkpoints (or ``always``)."""
        nonlocal window_start
        if run_path is None or not dist_.main:
            return None
        if config.checkpoint_every is None and not always:
            return None
        now = time.perf_counter()
        loop.clock_seconds = clock() - start
        loop.window_seconds += now - window_start
        window_start = now
        return save_checkpoint(
            run_path,
            model=model,
            optimiser=optimiser,
            scheduler=schedule,
            loop=loop,
            keep=config.keep_checkpoints,
            scaler=scaler if scaler.is_enabled() else None,
        )

    def after_step() -> str | None:
        """Evaluation, snapshots, budgets and signals after a step: why to stop, if at all."""
        reason = None
        if loop.step % config.eval_every == 0 and run_evaluation():
            reason = "early_stopping"
        elapsed = clock() - start
        while pending_snapshots and elapsed >= 60 * pending_snapshots[0]:
            mark = pending_snapshots.pop(0)
            loop.snapshots_done.append(mark)
            if on_snapshot is not None and dist_.main:
                on_snapshot(mark, loop.step)
        if deadline is not None and elapsed >= deadline:
            reason = reason or "max_minutes"
        if signals.received is not None:
            reason = "interrupted"
        if loop.step >= config.max_steps:
            reason = reason or "max_steps"
        return dist_.from_main(reason)

    def epoch_steps(epoch: int, consumed: int) -> Iterator[list[Any]]:
        """The rest of an epoch, ``config.accumulate`` batches per step (a short tail dropped)."""
        if dist_.world == 1:
            local = batches(epoch, consumed)
        else:
            local = dist_.shard(batches(epoch, 0), consumed)
        group: list[Any] = []
        for batch in local:
            group.append(batch)
            if len(group) == config.accumulate:
                yield group
                group = []

    def optimiser_step(group: list[Any]) -> tuple[float, int]:
        """Forward and backward over ``group`` (on every rank), then one update.

        The loss is normalised by the tokens of the whole step (all batches, all ranks), so the
        gradient is that of one batch holding them all; DDP averages over ranks, hence ``world``.
        """
        optimiser.zero_grad(set_to_none=True)
        total = dist_.sum(sum(count_tokens(b) for b in group)) if count_tokens else None
        loss_total, tokens = 0.0, 0
        for index, batch in enumerate(group):
            last = index == len(group) - 1
            sync = trained.no_sync() if dist_.world > 1 and not last else contextlib.nullcontext()
            with sync:
                with torch.autocast(
                    device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None
                ):
                    loss_sum, n_tokens = loss_fn(trained, move_to(batch, device))
                n = int(n_tokens)
                scale = dist_.world / max(total, 1) if total is not None else 1 / max(n, 1)
                scaler.scale(loss_sum.float() * scale).backward()
            loss_total += loss_sum.detach().item()
            tokens += n
        scaler.unscale_(optimiser)
        if config.clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        scaler.step(optimiser)
        scaler.update()
        schedule.step()
        return loss_total, tokens

    stopped: str | None = None if loop.step < config.max_steps else "max_steps"
    model.train()
    try:
        with signals:
            while stopped is None:
                produced = False
                for group in epoch_steps(loop.epoch, loop.batches_in_epoch):
                    produced = True
                    loss_sum, tokens = optimiser_step(group)
                    loop.step += 1
                    loop.batches_in_epoch += len(group)
                    loop.window_loss += loss_sum
                    loop.window_tokens += tokens
                    if bar is not None:
                        bar.update(1)
                    if loop.step % config.log_every == 0:
                        now = time.perf_counter()
                        seconds = loop.window_seconds + now - window_start
                        row = {
                            "step": loop.step,
                            "epoch": loop.epoch,
                            "lr": schedule.get_last_lr()[0],
                            "train_loss": loop.window_loss / max(loop.window_tokens, 1),
                            "tokens_per_s": loop.window_tokens / max(seconds, 1e-9),
                            "minutes": (clock() - start) / 60,
                        }
                        log.write(row)
                        if bar is not None:
                            bar.set_postfix(
                                loss=f"{row['train_loss']:.3f}",
                                lr=f"{row['lr']:.2e}",
                                tok_s=f"{row['tokens_per_s']:.0f}",
                            )
                        loop.window_loss, loop.window_tokens, loop.window_seconds = 0.0, 0, 0.0
                        window_start = now
                    stopped = after_step()
                    if stopped is not None:
                        break
                    if config.checkpoint_every and loop.step % config.checkpoint_every == 0:
                        checkpoint()
                else:
                    # A resumed run may start at the very end of an epoch: nothing left of it.
                    if not produced and loop.batches_in_epoch == 0:
                        raise ValueError(
                            "the training data produced no step: no batch, or fewer batches "
                            f"per process than train.accumulate={config.accumulate}"
                        )
                    loop.epoch += 1
                    loop.batches_in_epoch = 0
            if stopped != "interrupted" and loop.step % config.eval_every != 0:
                run_evaluation()
            # A stopped run can always continue; a resumed one leaves no older checkpoint behind.
            saved = checkpoint(always=signals.received is not None or resume)
    finally:
        log.close()
        if bar is not None:
            bar.close()
    return TrainResult(
        loop.step,
        time.perf_counter() - wall_start,
        stopped,
        loop.best,
        log.rows,
        clock() - start,
        signals.received,
        saved,
    )


class _SignalFlag:
    """While active, SIGINT and SIGTERM set :attr:`received` instead of killing the process; a
    second SIGINT raises ``KeyboardInterrupt`` as usual. The previous handlers come back on
    exit."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.received = enabled, None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalFlag:
        if self.enabled and threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                number = getattr(signal, name)
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _handle(self, number: int, frame: Any) -> None:
        if self.received is not None and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(number).name
        logger.warning("%s received: stopping after this step", self.received)


def _progress_bar(total: int | None, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True, leave=True
    )


def config_dict(config: TrainConfig) -> dict[str, Any]:
    return asdict(config)

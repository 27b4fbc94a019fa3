"""The training engine every qkv model trains through.

One loop, parameterised by what differs between tasks: a ``loss_fn(model, batch) -> (loss_sum,
n_tokens)``, an epoch-indexed batch source, and an optional ``evaluate()`` returning metrics.
It owns the optimiser (AdamW, no weight decay on biases, norms and embeddings), the learning-rate
schedule, gradient clipping, the step and time budgets, early stopping on a validation metric,
checkpoints, the metrics CSV (and TensorBoard), and the progress bar.

:class:`TrainingLoop` is the loop as an object: :meth:`~TrainingLoop.step` (one optimiser
update), :meth:`~TrainingLoop.after_step` (logging, evaluation, snapshots, budgets, signals,
periodic checkpoints), :meth:`~TrainingLoop.evaluate`, :meth:`~TrainingLoop.checkpoint` and
:meth:`~TrainingLoop.run`. Everything it must carry over a stop is in its ``state``
(:class:`~qkv.training.state.LoopState`); tasks call :func:`train`, which builds one and runs it.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from qkv.hardware import warn_if_slow_bfloat16
from qkv.training.config import CLOCKS, PRECISIONS, BudgetClock, TrainConfig, TrainResult
from qkv.training.device import move_to, resolve_device, training_device
from qkv.training.distributed import Distributed
from qkv.training.metrics_log import MetricsLog
from qkv.training.optimiser import optimiser_and_schedule, parameter_groups
from qkv.training.signals import SignalFlag
from qkv.training.state import LoopState, resume_run, save_checkpoint

__all__ = [  # what tasks, the CLI, benchmarks and tests import from here
    "CLOCKS",
    "TrainConfig",
    "TrainResult",
    "TrainingLoop",
    "parameter_groups",
    "resolve_device",
    "train",
    "training_device",
]

logger = logging.getLogger(__name__)

LossFn = Callable[[nn.Module, Any], tuple[Tensor, Tensor]]
Batches = Callable[[int, int], Iterable[Any]]


class TrainingLoop:
    """One training run of ``model``, step by step (the arguments are :func:`train`'s).

    Building it prepares the run: the model on its device, the seed, the optimiser, schedule and
    grad scaler, the resumed checkpoint (``resume``), the metrics log, the wrapped model
    (DistributedDataParallel, ``torch.compile``) and the budget clock. :meth:`run` then trains
    until a budget, early stopping or a signal stops it, and closes the log and the bar.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        loss_fn: LossFn,
        batches: Batches,
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
        device: torch.device | None = None,
    ) -> None:
        self.dist = distributed or Distributed()
        if count_tokens is None and (config.accumulate > 1 or self.dist.world > 1):
            raise ValueError("accumulating batches or processes needs count_tokens")
        self.model, self.config, self.loss_fn, self.batches = model, config, loss_fn, batches
        self.count_tokens, self.evaluate_fn = count_tokens, evaluate
        self.metric, self.higher_is_better = metric, higher_is_better
        self.on_best, self.on_snapshot, self.resumed = on_best, on_snapshot, resume
        # The caller's device when it has resolved one (a TrainingRun has), else resolved here.
        self.device = device if device is not None else training_device(config, self.dist)
        if config.precision == "bf16":
            warn_if_slow_bfloat16(self.device, "train.precision=bf16")
        model.to(self.device)
        torch.manual_seed(config.seed)
        self.optimiser, self.schedule = optimiser_and_schedule(model, config)
        self.scaler = torch.amp.GradScaler("cuda", enabled=config.precision == "fp16")
        self.run_path = Path(run_dir) if run_dir is not None else None
        self.state = LoopState()
        if resume:
            self.state = resume_run(
                self.run_path,
                model=model,
                optimiser=self.optimiser,
                scheduler=self.schedule,
                scaler=self.scaler,
                distributed=self.dist,
            )
        self.log = MetricsLog(
            self.run_path / "metrics.csv" if self.run_path is not None and self.dist.main else None,
            keep_until=self.state.step if resume else None,
            tensorboard=config.tensorboard,
        )
        # With a time budget the step count is not known in advance: show rate and elapsed time.
        self.bar = _progress_bar(
            None if config.max_minutes else config.max_steps,
            progress and self.dist.main,
            self.state.step,
        )
        self.trained = self._wrapped(model)  # what the forward passes run through
        self.autocast_dtype = PRECISIONS[config.precision]
        self.budget = BudgetClock(config, self.state.clock_seconds, self.state.snapshots_done)
        self.wall_start = time.perf_counter()
        self.window_start = self.wall_start  # when this process began the metrics window
        self.signals = SignalFlag(enabled=handle_signals)

    def _wrapped(self, model: nn.Module) -> nn.Module:
        trained = model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [self.device] if self.device.type == "cuda" else None
            trained = DistributedDataParallel(model, device_ids=device_ids)
        if self.config.compile:
            trained = cast(nn.Module, torch.compile(trained))  # a module compiles to a module
        return trained

    def run(self) -> TrainResult:
        """Train until a budget runs out, validation stops improving, or a signal; evaluate at
        the end (unless interrupted or just evaluated) and checkpoint when the run is to be
        continued."""
        config, state = self.config, self.state
        stopped: str | None = None if state.step < config.max_steps else "max_steps"
        self.model.train()
        try:
            with self.signals:
                while stopped is None:
                    stopped = self._run_epoch()
                if stopped != "interrupted" and state.step % config.eval_every != 0:
                    self.evaluate()
                # A stopped run can always continue; a resumed one leaves no older checkpoint.
                saved = self.checkpoint(always=self.signals.received is not None or self.resumed)
        finally:
            self.log.close()
            if self.bar is not None:
                self.bar.close()
        return TrainResult(
            state.step,
            time.perf_counter() - self.wall_start,
            stopped,
            state.best,
            self.log.rows,
            self.budget.seconds(),
            self.signals.received,
            saved,
        )

    def _run_epoch(self) -> str | None:
        """The rest of the current epoch: why to stop, or None when the epoch ran out."""
        state = self.state
        produced = False
        for group in self._epoch_steps(state.epoch, state.batches_in_epoch):
            produced = True
            self.step(group)
            stopped = self.after_step()
            if stopped is not None:
                return stopped
        # A resumed run may start at the very end of an epoch: nothing left of it.
        if not produced and state.batches_in_epoch == 0:
            raise ValueError(
                "the training data produced no step: no batch, or fewer batches per process "
                f"than train.accumulate={self.config.accumulate}"
            )
        state.epoch += 1
        state.batches_in_epoch = 0
        return None

    def _epoch_steps(self, epoch: int, consumed: int) -> Iterator[list[Any]]:
        """The rest of an epoch, ``config.accumulate`` batches per step (a short tail dropped)."""
        if self.dist.world == 1:
            local = self.batches(epoch, consumed)
        else:
            local = self.dist.shard(self.batches(epoch, 0), consumed)
        group: list[Any] = []
        for batch in local:
            group.append(batch)
            if len(group) == self.config.accumulate:
                yield group
                group = []

    def step(self, group: list[Any]) -> None:
        """One optimiser update: forward and backward over ``group`` (on every rank), then the
        update, counted in ``state`` (step, data position, metrics window).

        The loss is normalised by the tokens of the whole step (all batches, all ranks), so the
        gradient is that of one batch holding them all; DDP averages over ranks, hence ``world``.
        """
        config, dist_, scaler = self.config, self.dist, self.scaler
        self.optimiser.zero_grad(set_to_none=True)
        count = self.count_tokens
        total = dist_.sum(sum(count(b) for b in group)) if count else None
        loss_total, tokens = 0.0, 0
        for index, batch in enumerate(group):
            last = index == len(group) - 1
            no_sync = dist_.world > 1 and not last
            # no_sync: DistributedDataParallel's, reached through torch.compile's wrapper if any.
            no_sync_ = self.trained.no_sync() if no_sync else contextlib.nullcontext()  # type: ignore[operator]  # Module.__getattr__ is typed Tensor | Module
            with no_sync_:
                with torch.autocast(
                    self.device.type,
                    dtype=self.autocast_dtype,
                    enabled=self.autocast_dtype is not None,
                ):
                    loss_sum, n_tokens = self.loss_fn(self.trained, move_to(batch, self.device))
                n = int(n_tokens)
                scale = dist_.world / max(total, 1) if total is not None else 1 / max(n, 1)
                scaler.scale(loss_sum.float() * scale).backward()
            loss_total += loss_sum.detach().item()
            tokens += n
        scaler.unscale_(self.optimiser)
        if config.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), config.clip_norm)
        scaler.step(self.optimiser)
        scaler.update()
        if scaler.is_enabled():
            # The scaler skips the optimiser's step when the scaled gradients overflow (fp16's
            # first steps often do) while the schedule follows the loop's step count, so PyTorch's
            # "lr_scheduler.step() before optimizer.step()" warning would blame a correct order.
            with warnings.catch_warnings():
                warnings.filterwarnings(
                    "ignore", "Detected call of `lr_scheduler.step", UserWarning
                )
                self.schedule.step()
        else:
            self.schedule.step()
        state = self.state
        state.step += 1
        state.batches_in_epoch += len(group)
        state.window_loss += loss_total
        state.window_tokens += tokens
        if self.bar is not None:
            self.bar.update(1)

    def after_step(self) -> str | None:
        """Everything between two steps: the training-loss row every ``log_every`` steps,
        evaluation, snapshots, the budgets and signals; why to stop (rank 0 decides for all), or
        None, and then the periodic checkpoint when one is due."""
        config, state = self.config, self.state
        if state.step % config.log_every == 0:
            self._log_window()
        reason = None
        if state.step % config.eval_every == 0 and self.evaluate():
            reason = "early_stopping"
        elapsed = self.budget.seconds()
        for mark in self.budget.marks_passed(elapsed):
            state.snapshots_done.append(mark)
            if self.on_snapshot is not None and self.dist.main:
                self.on_snapshot(mark, state.step)
        if self.budget.expired(elapsed):
            reason = reason or "max_minutes"
        if self.signals.received is not None:
            reason = "interrupted"
        if state.step >= config.max_steps:
            reason = reason or "max_steps"
        reason = self.dist.from_main(reason)
        if reason is None and config.checkpoint_every and state.step % config.checkpoint_every == 0:
            self.checkpoint()
        return reason

    def _log_window(self) -> None:
        """Write the training row of the steps since the last one, and start a new window."""
        state, now = self.state, time.perf_counter()
        seconds = state.window_seconds + now - self.window_start
        row = {
            "step": state.step,
            "epoch": state.epoch,
            "lr": self.schedule.get_last_lr()[0],
            "train_loss": state.window_loss / max(state.window_tokens, 1),
            "tokens_per_s": state.window_tokens / max(seconds, 1e-9),
            "minutes": self.budget.seconds() / 60,
        }
        self.log.write(row)
        if self.bar is not None:
            self.bar.set_postfix(
                loss=f"{row['train_loss']:.3f}",
                lr=f"{row['lr']:.2e}",
                tok_s=f"{row['tokens_per_s']:.0f}",
            )
        state.window_loss, state.window_tokens, state.window_seconds = 0.0, 0, 0.0
        self.window_start = now

    def evaluate(self) -> bool:
        """Evaluate (eval mode, no gradients), log, track the best and call ``on_best`` when the
        metric improves; True when patience has run out. Rank 0 only; False elsewhere."""
        if self.evaluate_fn is None or not self.dist.main:
            return False
        config, state, metric = self.config, self.state, self.metric
        self.model.eval()
        with torch.no_grad():
            metrics = self.evaluate_fn()
        self.model.train()
        if metric not in metrics:
            raise ValueError(f"evaluate() returned {sorted(metrics)}, without metric {metric!r}")
        value, best = metrics[metric], state.best
        improved = best is None or (
            value > best[metric] if self.higher_is_better else value < best[metric]
        )
        self.log.write({"step": state.step, "epoch": state.epoch, **metrics})
        if improved:
            state.best, state.bad_evaluations = {"step": state.step, **metrics}, 0
            if self.on_best is not None:
                self.on_best(metrics)
        else:
            state.bad_evaluations += 1
        logger.info("step %d: %s", state.step, metrics)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{metric} {value:.4g}", refresh=False)
        return config.patience is not None and state.bad_evaluations >= config.patience

    def checkpoint(self, always: bool = False) -> Path | None:
        """Save a checkpoint (rank 0, with a run directory) when the run makes periodic ones
        (``train.checkpoint_every``) or ``always``; its directory, or None."""
        if self.run_path is None or not self.dist.main:
            return None
        if self.config.checkpoint_every is None and not always:
            return None
        now = time.perf_counter()
        self.state.clock_seconds = self.budget.seconds()
        self.state.window_seconds += now - self.window_start
        self.window_start = now
        return save_checkpoint(  # looked up here at each call (tests/cli/crash_in_save.py)
            self.run_path,
            model=self.model,
            optimiser=self.optimiser,
            scheduler=self.schedule,
            loop=self.state,
            keep=self.config.keep_checkpoints,
            scaler=self.scaler if self.scaler.is_enabled() else None,
        )


def train(
    model: nn.Module,
    *,
    loss_fn: LossFn,
    batches: Batches,
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
    device: torch.device | None = None,
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
        device: where to train, when the caller has resolved it; ``None``: from ``config``.
    """
    loop = TrainingLoop(
        model,
        loss_fn=loss_fn,
        batches=batches,
        config=config,
        evaluate=evaluate,
        metric=metric,
        higher_is_better=higher_is_better,
        on_best=on_best,
        on_snapshot=on_snapshot,
        run_dir=run_dir,
        resume=resume,
        handle_signals=handle_signals,
        progress=progress,
        count_tokens=count_tokens,
        distributed=distributed,
        device=device,
    )
    return loop.run()


def _progress_bar(total: int | None, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True, leave=True
    )

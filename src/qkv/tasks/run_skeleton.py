"""One run skeleton for every task: what a training run does whatever its task, so that a task's
``train`` holds only what differs (its data, model, loss and evaluation).

    run = TrainingRun(config, resume=..., overwrite=..., progress=...)  # the caller builds it
    trained = run.spec.train(run)                       # the task's train(run) below

    # in a task's train(run):
    vocab = run.shared(make=..., load=..., save=...)   # rank 0 makes it, the others read it
    model = ...                                         # the task builds its model
    run.save(model_config, write=vocab_files)           # config.json + the task's files (rank 0)
    return run.train(model, loss_fn=..., batches=..., evaluate=..., metric=..., ...)

:class:`TrainingRun` rejects what needs no data (the device) before any write, claims the run
directory (:func:`~qkv.tasks.run_dir.claim_run_dir`), seeds, writes ``config.json`` with the
model section as built, keeps the best weights, writes snapshots as model directories of their
own, and counts parameters once each (tied weights are one tensor). After each of those writes
it writes ``manifest.json`` (:func:`~qkv.tasks.run_dir.save_manifest`), last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from qkv.io import atomic_write_json
from qkv.manifest import file_entry
from qkv.models.registry import config_to_dict
from qkv.tasks.registry import task as registered
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    RESUME_READS,
    WEIGHTS_FILE,
    check_run_files,
    claim_run_dir,
    save_manifest,
    snapshot_dir,
)
from qkv.training.checkpoint import save_weights
from qkv.training.device import rank_device, training_device
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainResult, train

T = TypeVar("T")


@dataclass(frozen=True)
class Trained:
    """A finished run: where its model is, how training ended, its parameters (each tensor
    counted once)."""

    model_dir: Path
    result: TrainResult
    parameters: int


def count_parameters(model: nn.Module) -> int:
    """Parameters of ``model``, a tensor shared by two modules (tied embeddings) counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


class TrainingRun:
    """A run of ``config`` being set up and trained (see the module docstring).

    The caller (``qkv train``, :func:`run_training`) builds the run; the task's ``train(run)``
    adds what differs. ``config.family`` must be one of its task's model families.

    Args:
        resume: continue the run in ``config.out_dir`` from its latest checkpoint; files the
            run wrote (vocabularies) are read back, not made again.
        overwrite: start afresh in a directory that already holds a run (its outputs are
            removed first); without it such a directory is an error.
        distributed: this process's rank under torchrun: rank 0 makes and writes the shared
            files; the other ranks read what it wrote.
        progress: a progress bar; handle_signals: on SIGINT/SIGTERM, finish the step,
            checkpoint and return.
        device: the device the caller resolved with
            :func:`~qkv.training.device.training_device` (``None``: resolved here).
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        resume: bool = False,
        overwrite: bool = False,
        distributed: Distributed | None = None,
        progress: bool = False,
        handle_signals: bool = False,
        device: torch.device | None = None,
    ) -> None:
        spec = registered(config.task)  # the one lookup of the run's task
        if config.family not in spec.families:
            raise ValueError(
                f"{spec.name} trains model.family {' or '.join(spec.families)}, got "
                f"{config.family!r}"
            )
        self.spec, self.config, self.out = spec, config, Path(config.out_dir)
        self.resume, self.progress, self.handle_signals = resume, progress, handle_signals
        self.distributed = distributed or Distributed()
        # The device, resolved once (by the caller, who needed it to join torchrun's process
        # group, or here) and rejected before any write; the engine trains on it.
        self.device = (
            training_device(config.train, self.distributed)
            if device is None
            else rank_device(device, config.train, self.distributed)
        )
        if not resume and self.distributed.main:
            claim_run_dir(self.out, overwrite)
        if resume:  # what it reads back (qkv train --resume checked it already, before any write)
            check_run_files(self.out, only=RESUME_READS)
        torch.manual_seed(config.train.seed)
        self._saved: dict[str, Any] | None = None
        self._shared: list[Callable[[Path], object]] = []
        self._write: Callable[[Path], object] = lambda directory: None

    def shared(
        self, *, make: Callable[[], T], load: Callable[[Path], T], save: Callable[[T, Path], object]
    ) -> T:
        """A value every rank must share (a vocabulary trained on the data): rank 0 makes it
        and writes it with the run's other files in :meth:`save` (so a run that fails before,
        on a model too large say, writes nothing); the other ranks wait for that and load it.
        A resumed run loads what it saved."""
        if self.resume:
            return load(self.out)
        if self.distributed.main:
            value = make()
            self._shared.append(lambda directory: save(value, directory))
            return value
        self.distributed.barrier()  # rank 0 has written it (in save)
        return load(self.out)

    def save(self, model_config: Any, write: Callable[[Path], object] | None = None) -> None:
        """Write ``config.json`` (the model section as built), the shared values and, through
        ``write(directory)``, the task's own files (vocabularies, labels) into the run directory
        (rank 0); snapshots write the same."""
        saved = self.config.to_dict()
        saved["model"] = {"family": self.config.family, **config_to_dict(model_config)}
        self._saved, self._write = saved, write or (lambda directory: None)
        if self.distributed.main:
            for write_shared in self._shared:
                self.out.mkdir(parents=True, exist_ok=True)
                write_shared(self.out)
            self._write_files(self.out, saved)
            # Last: the files just written; the best weights (a resumed run's) keep their entry.
            save_manifest(self.out, written=RESUME_READS)
            if self._shared:
                self.distributed.barrier()  # the other ranks may read the shared values now

    def _write_files(self, directory: Path, saved: dict[str, Any]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_json(directory / CONFIG_FILE, saved)
        self._write(directory)

    def train(
        self,
        model: nn.Module,
        *,
        loss_fn: Callable[[nn.Module, Any], tuple[torch.Tensor, torch.Tensor]],
        batches: Callable[[int, int], Iterable[Any]],
        evaluate: Callable[[], dict[str, float]],
        metric: str,
        higher_is_better: bool,
        count_tokens: Callable[[Any], int] | None = None,
    ) -> Trained:
        """Train ``model`` with the engine (:func:`qkv.training.trainer.train`): the weights
        with the best ``metric`` go to the run directory, snapshots (``train.snapshot_minutes``)
        to ``snapshots/<minutes>min/``, each a model directory of its own."""
        if self._saved is None:
            raise RuntimeError("TrainingRun.save(model_config) comes before train()")
        saved = self._saved

        def snapshot(minutes: float, step: int) -> None:
            directory = snapshot_dir(self.out, minutes)
            self._write_files(directory, {**saved, "snapshot": {"minutes": minutes, "step": step}})
            save_weights(model, directory / WEIGHTS_FILE)
            save_manifest(directory)  # last, over every file of the snapshot

        def best(_: object) -> None:
            # The manifest names the new weights (and the ones they replace) before the rename,
            # and the new weights alone after it: a kill anywhere between leaves a run that loads.
            save_weights(model, self.out / WEIGHTS_FILE, before_rename=lambda tmp: save_manifest(
                self.out, written=(), replacing={WEIGHTS_FILE: file_entry(tmp)}))  # fmt: skip
            save_manifest(self.out, written=(WEIGHTS_FILE,))

        result = train(
            model,
            loss_fn=loss_fn,
            batches=batches,
            config=self.config.train,
            evaluate=evaluate,
            metric=metric,
            higher_is_better=higher_is_better,
            on_best=best,
            on_snapshot=snapshot,
            run_dir=self.out,
            resume=self.resume,
            handle_signals=self.handle_signals,
            progress=self.progress,
            count_tokens=count_tokens,
            distributed=self.distributed,
            device=self.device,
        )
        return Trained(self.out, result, count_parameters(model))


def run_training(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> Trained:
    """Train ``config`` with its task (``config.task``): build the :class:`TrainingRun` and hand
    it to the task's ``train(run)``. The options are :class:`TrainingRun`'s."""
    run = TrainingRun(config, resume=resume, overwrite=overwrite, distributed=distributed,
                      progress=progress, handle_signals=handle_signals)  # fmt: skip
    return run.spec.train(run)

"""Everything a stopped run needs to continue exactly where it stopped, saved so that it cannot
be lost and loaded without running code from the file.

A checkpoint is a directory ``RUN_DIR/checkpoints/step-000123/`` with

    model.safetensors      the weights
    optimizer.safetensors  the optimiser's tensors (AdamW's step counts and moments)
    rng.safetensors        the torch CPU (and CUDA) generator states
    state.json             loop position (step, epoch, batches consumed in the epoch, clock),
                           best metrics, early-stopping count, the optimiser's hyper-parameters,
                           the scheduler, the Python and NumPy generator states
    manifest.json          the size and SHA-256 of the other four (:mod:`qkv.manifest`), written
                           last; a checkpoint without one (older) is read unchecked

written under a temporary name, flushed with ``fsync`` and renamed into place; only then does
``RUN_DIR/checkpoints/latest.json`` (itself replaced atomically) point at it, and only after that
are older checkpoints removed. A process killed at any moment leaves ``latest.json`` naming a
complete checkpoint; without ``latest.json`` (deleted by hand) the newest complete checkpoint is
the one to resume from. Nothing is pickled: tensors go to ``safetensors``, the rest to JSON, and
what is read back is checked before it is used.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from qkv.io import (
    atomic_write,
    atomic_write_json,
    fsync_dir,
    make_temporary_directory,
    remove_stale_temporaries,
)
from qkv.manifest import verify_manifest, write_manifest
from qkv.training.checkpoint import (
    CheckpointError,
    check_finite,
    load_weights,
    read_json,
    save_weights,
)
from qkv.training.distributed import Distributed

logger = logging.getLogger(__name__)

CHECKPOINTS, LATEST = "checkpoints", "latest.json"
FORMAT = 1
FILES = ("model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json")
NAME = re.compile(r"step-(\d{9})(?:-(\d+))?")  # step-000000123, or step-000000123-1 saved again


@dataclass
class LoopState:
    """Where the training loop stands: enough to continue it exactly."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0  # batches of ``epoch`` already consumed
    clock_seconds: float = 0.0  # time spent on the budget clock before this process
    best: dict[str, float] | None = None
    bad_evaluations: int = 0
    snapshots_done: list[float] = field(default_factory=list)
    # The metrics window in progress (steps since the last train_loss row): its summed loss,
    # tokens and wall seconds, so that a resumed run logs the row it would have logged.
    window_loss: float = 0.0
    window_tokens: int = 0
    window_seconds: float = 0.0


def save_checkpoint(
    run_dir: str | Path,
    *,
    model: nn.Module,
    optimiser: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loop: LoopState,
    keep: int = 1,
    scaler: torch.amp.GradScaler | None = None,
) -> Path:
    """Write a checkpoint of the run at ``loop.step`` and make it the latest; keep the newest
    ``keep`` checkpoints. Returns the checkpoint directory."""
    root = Path(run_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{loop.step:09d}"
    for attempt in range(1, 1000):  # a resumed run saving the same step again: a new name, so
        if not (root / name).exists():  # latest.json never points at a directory being replaced
            break
        name = f"step-{loop.step:09d}-{attempt}"
    tmp = make_temporary_directory(root, name)
    try:
        save_weights(model, tmp / "model.safetensors")
        tensors, groups = _optimiser_to_files(optimiser)
        _save_tensors(tensors, tmp / "optimizer.safetensors")
        _save_tensors(_torch_rng_state(), tmp / "rng.safetensors")
        state = {
            "format": FORMAT,
            "loop": asdict(loop),
            "param_groups": groups,
            "scheduler": _json_safe(scheduler.state_dict()),
            "grad_scaler": None if scaler is None else _json_safe(scaler.state_dict()),
            "python_rng": _python_rng_state(),
            "numpy_rng": _numpy_rng_state(),
        }
        atomic_write_json(tmp / "state.json", state)
        write_manifest(tmp, FILES)  # last: the size and SHA-256 of each file above
        final = root / name
        tmp.rename(final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_json(root / LATEST, {"checkpoint": name, "step": loop.step})
    _prune(root, keep=max(keep, 1), latest=name)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint ``latest.json`` names or, when it is missing or names no checkpoint, the
    newest complete one (with a warning); ``None`` when the run has none yet."""
    root = Path(run_dir) / CHECKPOINTS
    pointer: Any = None
    if (root / LATEST).is_file():
        try:
            pointer = read_json(root / LATEST)
        except CheckpointError as error:
            pointer = str(error)
        name = pointer.get("checkpoint") if isinstance(pointer, dict) else None
        if isinstance(name, str) and NAME.fullmatch(name) and (root / name).is_dir():
            return root / name
    found = complete_checkpoints(run_dir)
    if pointer is not None and not found:
        raise CheckpointError(f"{root / LATEST} names no checkpoint directory: {pointer!r}")
    if not found:
        return None
    why = "is missing" if pointer is None else f"names no checkpoint ({pointer!r})"
    logger.warning(
        "%s %s: resuming from the newest complete checkpoint, %s",
        root / LATEST,
        why,
        found[-1].name,
    )
    return found[-1]


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """The checkpoint directories under ``run_dir`` that hold every file, oldest first (a
    directory gets its final name only once complete; this also skips one emptied by hand)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = NAME.fullmatch(path.name)
        if match and path.is_dir() and all((path / f).is_file() for f in FILES):
            found.append((int(match[1]), int(match[2] or 0), path))
    return [path for *_, path in sorted(found)]


def load_checkpoint(
    directory: str | Path,
    *,
    model: nn.Module,
    optimiser: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler | None = None,
) -> LoopState:
    """Restore the model, optimiser, scheduler and every random generator from ``directory``;
    return the loop position. Errors name the file and what is wrong with it."""
    directory = Path(directory)
    state, loop = _read_state(directory)
    load_weights(model, directory / "model.safetensors")
    tensors = _load_tensors(directory / "optimizer.safetensors")
    try:
        optimiser.load_state_dict(_optimiser_from_files(tensors, state["param_groups"]))
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state.get("grad_scaler"):
            scaler.load_state_dict(state["grad_scaler"])
    except (KeyError, ValueError, RuntimeError) as error:
        raise CheckpointError(
            f"the optimiser state in {directory} does not fit this model and configuration: {error}"
        ) from None
    _restore_rng(_load_tensors(directory / "rng.safetensors"), state)
    return loop


def resume_run(
    run_dir: Path | None,
    *,
    model: nn.Module,
    optimiser: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler | None = None,
    distributed: Distributed | None = None,
) -> LoopState:
    """Continue the run in ``run_dir``: remove the temporaries that killed writes left (rank 0),
    load the checkpoint rank 0 chose (:func:`latest_checkpoint`) on every rank
    (:func:`load_checkpoint`) and return its loop position; an error when there is none."""
    dist_ = distributed or Distributed()
    if run_dir is not None and dist_.main:
        for path in remove_stale_temporaries(run_dir):
            logger.info("removed %s, left by a write that was killed", path)
    checkpoint = None if run_dir is None else latest_checkpoint(run_dir)
    checkpoint = dist_.from_main(checkpoint)  # every rank resumes from rank 0's choice
    if checkpoint is None:
        raise CheckpointError(
            f"nothing to resume: {run_dir}/{CHECKPOINTS} holds no complete checkpoint (a run "
            "saves one every train.checkpoint_every steps and when a signal stops it)"
        )
    return load_checkpoint(
        checkpoint, model=model, optimiser=optimiser, scheduler=scheduler, scaler=scaler
    )


def check_checkpoint(directory: str | Path) -> None:
    """Check what can be checked of a checkpoint without its model, before a resume writes
    anything: ``state.json`` and its loop values, every tensor file readable, the weights finite.
    Errors name the file and what is wrong with it."""
    directory = Path(directory)
    _read_state(directory)
    for name in ("optimizer.safetensors", "rng.safetensors"):
        _load_tensors(directory / name)
    path = directory / "model.safetensors"
    for key, tensor in _load_tensors(path).items():
        check_finite(key, tensor, path)


def _read_state(directory: Path) -> tuple[dict[str, Any], LoopState]:
    """``state.json`` and its loop values, once the checkpoint's files are checked against its
    ``manifest.json`` (a checkpoint saved before manifests has none: read as before)."""
    remedy = f"remove {directory} to resume from an older checkpoint, if there is one"
    verify_manifest(directory, remedy=remedy)
    state = read_json(directory / "state.json")
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{directory / 'state.json'} is not a qkv checkpoint (format 1)")
    return state, _loop_state(state.get("loop"), directory / "state.json")


def _loop_state(values: Any, path: Path) -> LoopState:
    """The ``loop`` section of ``state.json``, each value checked: a corrupt file is an error
    naming the key and the value, not a crash later in the loop."""

    def bad(key: str, want: str) -> CheckpointError:
        return CheckpointError(
            f"{path}: loop.{key} must be {want}, got {values.get(key)!r} (a corrupt checkpoint: "
            f"remove {path.parent} to resume from an older one, if there is one)"
        )

    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    if not isinstance(values, dict):
        raise CheckpointError(f"{path}: loop must be a JSON object, got {values!r}")
    unknown = sorted(set(values) - {f.name for f in fields(LoopState)})
    if unknown:
        raise CheckpointError(f"{path}: unknown loop keys {unknown}")
    for key in ("step", "epoch", "batches_in_epoch", "bad_evaluations", "window_tokens"):
        value = values.get(key, 0)
        if not (number(value) and isinstance(value, int) and value >= 0):
            raise bad(key, "an integer >= 0")
    for key in ("step", "epoch", "batches_in_epoch"):
        if key not in values:
            raise bad(key, "present")
    for key in ("clock_seconds", "window_seconds"):
        value = values.get(key, 0.0)
        if not (number(value) and math.isfinite(value) and value >= 0):
            raise bad(key, "a finite number >= 0")
    if not number(values.get("window_loss", 0.0)):  # NaN when training diverged: still resumable
        raise bad("window_loss", "a number")
    best = values.get("best")
    if best is not None and not (isinstance(best, dict) and all(number(v) for v in best.values())):
        raise bad("best", "null or an object of numbers")
    done = values.get("snapshots_done", [])
    if not (isinstance(done, list) and all(number(m) for m in done)):
        raise bad("snapshots_done", "a list of minutes")
    return LoopState(**values)


def _save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save

    data = save({k: v.detach().contiguous().cpu() for k, v in tensors.items()})
    atomic_write(path, lambda f: f.write(data))


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise CheckpointError(f"missing file {path}")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"cannot read {path}: {error}") from None


def _optimiser_to_files(
    optimiser: torch.optim.Optimizer,
) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Split ``optimiser.state_dict()`` into tensors (``state.<param>.<name>``) and JSON groups."""
    state_dict = optimiser.state_dict()
    tensors = {}
    for index, values in state_dict["state"].items():
        for name, value in values.items():
            tensors[f"state.{index}.{name}"] = torch.as_tensor(value)
    return tensors, _json_safe(state_dict["param_groups"])


def _optimiser_from_files(
    tensors: dict[str, torch.Tensor], groups: list[dict[str, Any]]
) -> dict[str, Any]:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        _, index, name = key.split(".", 2)
        state.setdefault(int(index), {})[name] = value
    groups = [{**g, "betas": tuple(g["betas"])} if "betas" in g else g for g in groups]
    return {"state": state, "param_groups": groups}


def _torch_rng_state() -> dict[str, torch.Tensor]:
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda.{i}"] = s
    return tensors


def _python_rng_state() -> list[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def _numpy_rng_state() -> list[Any]:
    state = np.random.get_state()
    assert isinstance(state, tuple)  # the legacy generator's (MT19937) state, never a dict
    name, keys, pos, has_gauss, cached = state
    return [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def _restore_rng(tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
    try:
        torch.set_rng_state(tensors["torch"])
        cuda = [tensors[k] for k in sorted(tensors) if k.startswith("cuda.")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)
        version, internal, gauss = state["python_rng"]
        random.setstate((version, tuple(internal), gauss))
        name, keys, pos, has_gauss, cached = state["numpy_rng"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"bad random generator state in the checkpoint: {error}") from None


def _json_safe(value: Any) -> Any:
    """Tensors to numbers or lists, tuples to lists, callables dropped (LambdaLR's lambdas)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items() if not callable(v)}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    json.dumps(value)  # anything else must already be plain JSON
    return value


def _prune(root: Path, *, keep: int, latest: str) -> None:
    """Remove all but the newest ``keep`` checkpoints (never ``latest``) and stale temporaries."""
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("step-"))
    old = [n for n in names[:-keep] if n != latest]
    for name in old:
        shutil.rmtree(root / name, ignore_errors=True)
    for stale in root.glob(".step-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)

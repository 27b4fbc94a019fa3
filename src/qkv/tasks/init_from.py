"""Starting a run from another run's weights (``train.init_from``): See et al. 2017's final
coverage phase, section 7: the pointer-generator trains to convergence without coverage, then
briefly (about 1% of the steps) with coverage and its loss, from those weights.

The new run is a run of its own: its step count, schedule and optimiser start at zero, and its
``config.json`` records ``train.init_from`` (where its weights came from). It loads the old run's
best weights (``model.safetensors``, checked against the old run's manifest) into the model its
own configuration builds. Every tensor must match by name and shape, except the parameters the
new configuration adds that start at zero, so that the new model computes exactly what the old
one did at its first step (:data:`ZERO_INITIALISED`). Anything else is refused, naming the keys.
The task reads the vocabulary from the old run, so that the ids mean the same words.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from qkv.tasks.run_dir import WEIGHTS_FILE, RunDirError, check_run_files
from qkv.training.checkpoint import CheckpointError, load_weights

__all__ = ["ZERO_INITIALISED", "init_from_run", "init_run_file"]

# Parameters (the last part of their names) that a new configuration may add to a run's weights:
# each starts at zero, where the model computes what it computed without it.
#   coverage_weight: w_c of See et al.'s coverage (eq. 11), in CopyHead (copy_attention="own")
#                    and in BahdanauDecoder (copy_attention="decoder").
ZERO_INITIALISED = ("coverage_weight",)


def init_from_run(model: nn.Module, run_dir: str | Path) -> tuple[str, ...]:
    """Load the best weights of the run in ``run_dir`` into ``model``; returns the names of the
    parameters the model adds (zero-initialised, :data:`ZERO_INITIALISED`), which keep their
    zeros. A missing, unexpected or differently shaped tensor is refused by name."""
    directory = Path(run_dir)
    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise RunDirError(
            f"train.init_from={run_dir}: {path} is missing; pass the directory of a trained run "
            "(one holding its best weights)"
        )
    check_run_files(directory, only=(WEIGHTS_FILE,))
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        stored = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118
    fresh = model.state_dict()
    shapes = [
        f"{name} {stored[name]} in the run, {tuple(tensor.shape)} here"
        for name, tensor in fresh.items()
        if name in stored and stored[name] != tuple(tensor.shape)
    ]
    if shapes:
        raise RunDirError(
            f"train.init_from={run_dir}: tensors of another shape: {'; '.join(shapes)} (the "
            "vocabulary comes from that run; keep its model sizes)"
        )
    added = tuple(
        name for name, tensor in fresh.items()
        if name not in stored and name.rsplit(".", 1)[-1] in ZERO_INITIALISED
        and not bool(tensor.count_nonzero())
    )  # fmt: skip
    try:
        load_weights(model, path, may_miss=added)
    except CheckpointError as error:
        raise RunDirError(
            f"train.init_from={run_dir}: {error}. The model must be the run's, except for "
            f"parameters it adds that start at zero ({', '.join(ZERO_INITIALISED)}): keep the "
            "run's model settings"
        ) from None
    return added


def init_run_file(run_dir: str | Path, name: str, setting: str = "train.init_from") -> Path:
    """The file ``name`` (a vocabulary) of the run in ``run_dir``, checked against its manifest:
    a run started from that run's weights reads its vocabulary, so the ids mean the same words
    (``setting``: the configuration key that named the run, for messages)."""
    path = Path(run_dir) / name
    if not path.is_file():
        raise RunDirError(
            f"{setting}={run_dir}: {path} is missing; pass the directory of a trained run "
            "of this task (its vocabulary gives the ids their words)"
        )
    check_run_files(run_dir, only=(name,))
    return path

"""Saving and loading weights and run metadata without pickle, and without torn files.

Weights go to ``safetensors`` (no code runs on load; shared tensors such as tied embeddings are
stored once); everything else is JSON. Every file is written to a temporary name in the same
directory, flushed to disk with ``fsync`` and renamed over the old one, so a crash mid-write
leaves the previous file intact (``torch.save`` is not atomic: Lightning#688).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from torch import nn

from qkv.io import fsync_dir


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt, or does not fit the model."""


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"missing file {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path} is not valid JSON: {error}") from None


def save_weights(model: nn.Module, path: str | Path) -> None:
    """Write the model's parameters and buffers to a safetensors file, atomically."""
    from safetensors.torch import save_model

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_model(model, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def load_weights(model: nn.Module, path: str | Path) -> None:
    """Load weights strictly; a corrupt file or any missing/unexpected tensor is an error."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"missing weights file {path}")
    try:
        missing, unexpected = load_model(model, path, strict=False)
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"cannot read weights from {path}: {error}") from None
    except RuntimeError as error:  # shape mismatches
        raise CheckpointError(f"weights in {path} do not fit the model: {error}") from None
    if missing or unexpected:
        raise CheckpointError(
            f"weights in {path} do not match the model: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}"
        )

"""Saving and loading weights and run metadata without pickle, and without torn files.

Weights go to ``safetensors`` (no code runs on load; shared tensors such as tied embeddings are
stored once); everything else is JSON. Every file is written to a temporary name in the same
directory, flushed to disk with ``fsync`` and renamed over the old one, so a crash mid-write
leaves the previous file intact (``torch.save`` is not atomic: Lightning#688).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch
from torch import nn

from qkv.io import atomic_file


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


def save_weights(
    model: nn.Module, path: str | Path, *, before_rename: Callable[[Path], object] | None = None
) -> None:
    """Write the model's parameters and buffers to a safetensors file, atomically; an
    ``OSError`` (a full disk) names the file, and the previous file stays as it was.
    ``before_rename(tmp)`` runs once the complete file is written, before it replaces ``path``
    (a manifest records it there, :func:`qkv.manifest.write_manifest`)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    tensors, tied = weights_to_save(model)
    with atomic_file(path) as tmp:
        try:
            save_file(tensors, str(tmp), metadata=tied or None)
        except SafetensorError as error:  # not an OSError: atomic_file would let it through
            raise _as_os_error(error) from error
        if before_rename is not None:
            before_rename(tmp)


def _view_key(tensor: torch.Tensor) -> tuple[object, ...]:
    """What makes two state-dict entries the same tensor: one view of one storage (an empty
    tensor, which has no storage to share, is only itself)."""
    if tensor.untyped_storage().data_ptr() == 0:
        return (id(tensor),)
    return (
        tensor.device, tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
        tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype,
    )  # fmt: skip


def tied_names(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """``{name: kept}`` for every entry that is the same view of the same storage as another
    (tied embeddings): the alphabetically first name of each such group is kept."""
    groups: dict[tuple[object, ...], list[str]] = {}
    for name, tensor in state.items():
        groups.setdefault(_view_key(tensor), []).append(name)
    return {name: min(names) for names in groups.values() for name in names if name != min(names)}


def weights_to_save(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The model's state dict as safetensors stores it, and ``{tied name: kept name}``.

    A tensor tied to another is stored once (under the kept name; loading ties it again).
    Tensors that share a storage only in part are copied, each then stored whole: an LSTM on a
    GPU keeps all its weights as views of one flat cuDNN buffer, which safetensors' own
    ``save_model`` refuses."""
    state = model.state_dict()
    tied = tied_names(state)
    kept = {name: tensor.detach() for name, tensor in state.items() if name not in tied}
    users: dict[tuple[object, int], int] = {}
    for tensor in kept.values():
        where = (tensor.device, tensor.untyped_storage().data_ptr())
        users[where] = users.get(where, 0) + 1
    tensors = {}
    for name, tensor in kept.items():
        shared = users[(tensor.device, tensor.untyped_storage().data_ptr())] > 1
        tensors[name] = tensor.clone() if shared else tensor.contiguous()
    return tensors, tied


def _as_os_error(error: Exception) -> OSError:
    """safetensors' error for a failed write (``I/O error: No space left on device (os error
    28)``) as the ``OSError`` it reports, with its errno when the message gives one."""
    found = re.search(r"\(os error (\d+)\)", str(error))
    if found is None:
        return OSError(f"safetensors could not write the weights ({error})")
    code = int(found.group(1))
    return OSError(code, os.strerror(code))


def load_weights(model: nn.Module, path: str | Path, *, may_miss: Collection[str] = ()) -> None:
    """Load weights strictly; a corrupt file, a missing or unexpected tensor, a tensor whose
    dtype does not fit (integers for floating-point weights) or with NaN or infinite values is
    an error that names the tensor. The parameters named in ``may_miss`` may be absent from the
    file (they keep the model's values: a phase that adds zero-initialised parameters)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"missing weights file {path}")
    try:
        check_weights(model, path)
        stored = load_file(str(path))
        missing, unexpected = _load_tied(model, stored)
        missing = [name for name in missing if name not in may_miss]
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"cannot read weights from {path}: {error}") from None
    except RuntimeError as error:  # shape mismatches
        raise CheckpointError(f"weights in {path} do not fit the model: {error}") from None
    if missing or unexpected:
        raise CheckpointError(
            f"weights in {path} do not match the model: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}"
        )


def _load_tied(model: nn.Module, stored: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    """Load ``stored`` into ``model``; returns the missing and unexpected names, where a tied
    name (:func:`tied_names`) is neither missing when the file holds one name of its group nor
    expected when it holds another."""
    groups: dict[str, set[str]] = {}
    for name, kept in tied_names(model.state_dict()).items():
        groups.setdefault(kept, {kept}).add(name)
    members = {name: group for group in groups.values() for name in group}
    result = model.load_state_dict(stored, strict=False)
    missing = [n for n in result.missing_keys if not members.get(n, set()) & stored.keys()]
    unexpected = list(result.unexpected_keys)
    for group in groups.values():
        present = sorted(group & stored.keys())
        unexpected += present[1:]  # one name of a tied group is loaded; more is a mismatch
    return missing, unexpected


def check_weights(model: nn.Module, path: Path) -> None:
    """Refuse a tensor of ``path`` whose dtype the model's does not accept (floating point for
    floating point; otherwise the same dtype), or a floating-point tensor that is not finite.
    PyTorch would cast integers into the weights and copy NaN without a word."""
    from safetensors import safe_open

    expected = model.state_dict()
    with safe_open(str(path), framework="pt") as handle:
        for name in handle.keys():  # noqa: SIM118 - a safe_open handle is not a dict
            if name not in expected:
                continue  # reported by the strict key check
            tensor = handle.get_tensor(name)
            want = expected[name].dtype
            if (tensor.dtype.is_floating_point, want.is_floating_point) != (True, True) and (
                tensor.dtype != want
            ):
                raise CheckpointError(
                    f"weights in {path}: tensor {name!r} is {tensor.dtype}, but the model "
                    f"holds {want} there"
                )
            check_finite(name, tensor, path)


def check_finite(name: str, tensor: torch.Tensor, path: Path) -> None:
    """Refuse a floating-point weight of ``path`` holding NaN or inf, naming it and the count."""
    if tensor.dtype.is_floating_point:
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise CheckpointError(
                f"weights in {path}: tensor {name!r} holds {bad} NaN or infinite value(s) of "
                f"{tensor.numel()}"
            )

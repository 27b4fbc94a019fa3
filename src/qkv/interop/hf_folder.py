"""A saved Hugging Face model folder, read without ``transformers``: ``config.json`` as a dict
and ``model.safetensors`` with ``safetensors`` alone. Shared by every importer in
:mod:`qkv.interop`; each maps the two onto its own qkv model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor


def read_hf_folder(
    folder: str | Path,
    model_type: str,
    error: type[Exception],
    *,
    type_required: bool = False,
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The config and the weights (floating tensors as float32) of a folder saved by
    ``save_pretrained(safe_serialization=True)``.

    Args:
        model_type: the ``model_type`` the config must name (``"bert"``); a config without one
            passes unless ``type_required``.
        error: the importer's exception class, raised with the file and the problem named.
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    if not folder.is_dir():
        raise error(f"no model folder at {folder}")
    for name in ("config.json", "model.safetensors"):
        if not (folder / name).is_file():
            raise error(f"{folder} has no {name}: not a saved {model_type} model folder")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{folder / 'config.json'}: {problem}") from None
    if not isinstance(config, dict):
        raise error(f"{folder} holds a {type(config).__name__!r} model, not {model_type}")
    found = config.get("model_type", None if type_required else model_type)
    if found != model_type:
        raise error(f"{folder} holds a {found!r} model, not {model_type}")
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except Exception as problem:  # safetensors raises its own error types for corrupt files
        raise error(f"{folder / 'model.safetensors'} cannot be read: {problem}") from None
    _check_tensors(weights, folder / "model.safetensors", error)
    return config, {k: v.float() if v.is_floating_point() else v for k, v in weights.items()}


def _check_tensors(weights: dict[str, Tensor], path: Path, error: type[Exception]) -> None:
    """Refuse a weight or bias that is not floating point (PyTorch would cast integers into the
    model without a word) and a floating-point tensor holding NaN or inf, naming the tensor.
    Integer buffers (``position_ids``) pass."""
    for name, tensor in weights.items():
        if name.endswith((".weight", ".bias")) and not tensor.is_floating_point():
            raise error(
                f"{path}: tensor {name!r} has dtype {tensor.dtype}; weights and biases must be "
                "floating point"
            )
        if tensor.is_floating_point() and not bool(tensor.isfinite().all()):
            bad = int((~tensor.isfinite()).sum())
            raise error(f"{path}: tensor {name!r} holds {bad} NaN or infinite value(s)")

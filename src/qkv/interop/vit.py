"""Vision Transformer weights (Hugging Face ``ViTModel`` / ``ViTForImageClassification``) into
:class:`qkv.models.vit.ViT`.

Three ways in: :func:`from_hf_vit` takes a live ``transformers`` model; :func:`load_vit` reads a
saved Hugging Face folder (``config.json`` + ``model.safetensors``) without importing
``transformers``; :func:`vit_config` maps a ``ViTConfig`` dictionary to qkv's config.

The layouts agree tensor for tensor; only the names differ. Hugging Face files (and models before
transformers 5) name a layer's tensors ``encoder.layer.{i}.attention.attention.query``, ``...key``,
``...value``, ``attention.output.dense``, ``intermediate.dense``, ``output.dense``; the live
modules of transformers 5 name the same tensors ``layers.{i}.attention.q_proj`` ... ``o_proj``,
``mlp.fc1``, ``mlp.fc2``. Both are read. ``layernorm_before`` / ``layernorm_after`` are qkv's
pre-norm ``norm1`` / ``norm2``, the final ``layernorm`` is the encoder's ``norm``, and the
classifier's ``classifier`` is qkv's ``head``. A classification model holds the encoder under
``vit.``; a bare ``ViTModel`` has no prefix.

``ViTModel``'s pooler (``tanh(W h[CLS] + b)``, ``pooler.dense``) is not part of qkv's ViT: the
classifier reads the final [CLS] state directly, as ``ViTForImageClassification`` does, so the
pooler's tensors are dropped (logged). Without ``classifier`` tensors the model has no head
(``num_labels=0``), whatever ``id2label`` says.

Position interpolation is the same operation on both sides (bicubic, ``align_corners=False``, over
the grid of patch positions, [CLS] kept), so ``interpolate_pos_encoding=True`` at another image
size gives the same outputs as qkv at that size.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from torch import Tensor

from qkv.interop import hf_import
from qkv.interop.hf_folder import read_hf_folder
from qkv.models.vit import ViT, ViTConfig

logger = logging.getLogger(__name__)

# Hugging Face ``hidden_act`` -> qkv activation (Hugging Face's "gelu" is the exact erf GELU).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
# ViTConfig options that change the computation in ways qkv does not implement.
UNSUPPORTED = {"qkv_bias": True, "use_mask_token": False}
POOLER = ("pooler.dense.weight", "pooler.dense.bias")

_EMBEDDINGS = {
    "embeddings.cls_token": "cls_token",
    "embeddings.position_embeddings": "position_embeddings",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.bias",
    "layernorm.weight": "encoder.norm.weight",
    "layernorm.bias": "encoder.norm.bias",
}
# The two spellings of a layer's tensors: (layer prefix, {theirs: ours}).
_FILE_LAYOUT = (
    "encoder.layer",
    {
        "attention.attention.query": "self_attn.q_proj",
        "attention.attention.key": "self_attn.k_proj",
        "attention.attention.value": "self_attn.v_proj",
        "attention.output.dense": "self_attn.out_proj",
        "intermediate.dense": "ffn.linear1",
        "output.dense": "ffn.linear2",
        "layernorm_before": "norm1",
        "layernorm_after": "norm2",
    },
)
_MODULE_LAYOUT = (
    "layers",
    {
        "attention.q_proj": "self_attn.q_proj",
        "attention.k_proj": "self_attn.k_proj",
        "attention.v_proj": "self_attn.v_proj",
        "attention.o_proj": "self_attn.out_proj",
        "mlp.fc1": "ffn.linear1",
        "mlp.fc2": "ffn.linear2",
        "layernorm_before": "norm1",
        "layernorm_after": "norm2",
    },
)
_HEAD = {"classifier.weight": "head.weight", "classifier.bias": "head.bias"}


class ViTImportError(ValueError):
    """The ViT weights or config cannot be represented by qkv's model (the reason is named)."""


def _side(hf: dict[str, Any], key: str) -> int:
    """A size that Hugging Face allows as an int or an ``[h, w]`` pair; qkv's grid is square."""
    value = hf.get(key, {"image_size": 224, "patch_size": 16}[key])
    if isinstance(value, list | tuple):
        if len(value) != 2 or value[0] != value[1]:
            raise ViTImportError(f"ViT config {key}={value!r} is not supported (only square)")
        value = value[0]
    return value


def vit_config(hf: dict[str, Any]) -> ViTConfig:
    """qkv's config for a ``ViTConfig`` dictionary (``config.json`` or ``to_dict()``).

    ``num_labels`` is the number of ``id2label`` entries (``num_labels`` if given, else 0);
    :func:`from_hf_vit` and :func:`load_vit` set it to 0 when the weights hold no classifier.
    ``encoder_stride`` (masked image modelling's decoder) and the pooler's settings are ignored.
    """
    activation = hf_import.checked_activation(hf, UNSUPPORTED, ACTIVATIONS, "ViT", ViTImportError)
    labels = hf.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) else hf.get("num_labels", 0)
    try:
        return ViTConfig(
            image_size=_side(hf, "image_size"),
            patch_size=_side(hf, "patch_size"),
            num_channels=hf.get("num_channels", 3),
            hidden_size=hf["hidden_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=hf["num_attention_heads"],
            intermediate_size=hf["intermediate_size"],
            num_labels=num_labels,
            dropout=float(hf.get("hidden_dropout_prob", 0.0)),
            attention_dropout=float(hf.get("attention_probs_dropout_prob", 0.0)),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            activation=activation,
        )
    except KeyError as error:
        raise ViTImportError(f"ViT config lacks {error.args[0]!r}") from None
    except ValueError as error:
        raise ViTImportError(f"ViT config: {error}") from None


def vit_state_dict(hf: dict[str, Tensor], config: ViTConfig) -> dict[str, Tensor]:
    """qkv's state dict from a Hugging Face ViT one (encoder names with or without ``vit.``;
    either layer layout; ``classifier.*`` when ``config.num_labels > 0``).

    Raises:
        ViTImportError: a tensor is missing, or a name is not a ViT weight (a mask token, a
            masked-image-modelling decoder, more layers than the config): both listed.
    """
    prefix = "vit." if any(k.startswith("vit.") for k in hf) else ""
    modern = any(k.startswith(f"{prefix}{_MODULE_LAYOUT[0]}.") for k in hf)
    stem, layer = _MODULE_LAYOUT if modern else _FILE_LAYOUT
    names = {prefix + theirs: mine for theirs, mine in _EMBEDDINGS.items()}
    for i in range(config.num_layers):
        for theirs, mine in layer.items():
            for kind in ("weight", "bias"):
                names[f"{prefix}{stem}.{i}.{theirs}.{kind}"] = f"encoder.layers.{i}.{mine}.{kind}"
    if config.num_labels > 0:
        names.update(_HEAD)
    missing = sorted(k for k in names if k not in hf)
    pooler = {prefix + k for k in POOLER}
    unexpected = sorted(k for k in hf if k not in names and k not in pooler)
    hint = f"a mask token, another head, or more layers than num_hidden_layers={config.num_layers}"
    hf_import.check_names(missing, unexpected, "ViT", ViTImportError, hint)
    dropped = sorted(pooler & set(hf))
    if dropped:
        logger.info("left out ViTModel's pooler (not part of qkv's ViT): %s", ", ".join(dropped))
    return {mine: hf[theirs].contiguous() for theirs, mine in names.items()}


def _load(config: ViTConfig, weights: dict[str, Tensor]) -> ViT:
    if "classifier.weight" not in weights and "classifier.bias" not in weights:
        config = dataclasses.replace(config, num_labels=0)
    state = vit_state_dict(weights, config)
    return hf_import.load_checked(ViT(config), state, "ViT", ViTImportError)


def from_hf_vit(hf_model: Any) -> ViT:
    """A :class:`ViT` with the weights of a ``transformers`` ``ViTModel`` or
    ``ViTForImageClassification``, in eval mode."""
    return _load(vit_config(hf_model.config.to_dict()), hf_import.live_weights(hf_model))


def load_vit(folder: str | Path) -> ViT:
    """A :class:`ViT` from a saved Hugging Face ViT folder (``config.json`` and
    ``model.safetensors``), read with ``safetensors`` alone, in eval mode."""
    hf, weights = read_hf_folder(folder, "vit", ViTImportError)
    return _load(vit_config(hf), weights)

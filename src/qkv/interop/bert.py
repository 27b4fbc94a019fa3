"""BERT weights (Hugging Face ``BertModel`` layout) into :class:`BertEncoder`.

Three ways in: :func:`from_hf_bert` takes a live ``transformers`` model; :func:`load_bert` reads a
saved Hugging Face folder (``config.json`` + ``model.safetensors``) without importing
``transformers``; :func:`bert_config` maps a ``BertConfig`` dictionary to qkv's config.

The layouts agree tensor for tensor (both use ``nn.Linear``); only the names differ:
``encoder.layer.{i}.attention.self.query`` is qkv's ``encoder.layers.{i}.self_attn.q_proj``,
``attention.output.LayerNorm`` is ``norm1`` (post-norm: after the attention's residual sum),
``output.LayerNorm`` is ``norm2``. Weights of a task model (``BertForMaskedLM``,
``BertForSequenceClassification``) sit under a ``bert.`` prefix; its head is left out.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from torch import Tensor

from qkv.interop import hf_import
from qkv.interop.hf_folder import read_hf_folder
from qkv.models.bert.model import BertConfig, BertEncoder

logger = logging.getLogger(__name__)

# Hugging Face ``hidden_act`` -> qkv activation (Hugging Face's "gelu" is the exact erf GELU).
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}
# BertConfig options that change the computation in ways qkv does not implement.
UNSUPPORTED = {
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "add_cross_attention": False,
}
# Buffers some checkpoints save beside the weights; they hold no learned values.
BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")

_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "word_embeddings.weight",
    "embeddings.position_embeddings.weight": "position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "token_type_embeddings.weight",
    "embeddings.LayerNorm.weight": "embed_norm.weight",
    "embeddings.LayerNorm.bias": "embed_norm.bias",
    "pooler.dense.weight": "pooler.weight",
    "pooler.dense.bias": "pooler.bias",
}
_LAYER = {
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ffn.linear1",
    "output.dense": "ffn.linear2",
    "output.LayerNorm": "norm2",
}


class BertImportError(ValueError):
    """The BERT weights or config cannot be represented by qkv's model (the reason is named)."""


def bert_config(hf: dict[str, Any]) -> BertConfig:
    """qkv's config for a ``BertConfig`` dictionary (``config.json`` or ``to_dict()``)."""
    activation = hf_import.checked_activation(hf, UNSUPPORTED, ACTIVATIONS, "BERT", BertImportError)
    try:
        return BertConfig(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=hf["num_attention_heads"],
            intermediate_size=hf["intermediate_size"],
            max_position_embeddings=hf["max_position_embeddings"],
            type_vocab_size=hf.get("type_vocab_size", 2),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            activation=activation,
            dropout=float(hf.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(hf.get("attention_probs_dropout_prob", 0.1)),
            pad_token_id=hf.get("pad_token_id") or 0,
        )
    except KeyError as error:
        raise BertImportError(f"BERT config lacks {error.args[0]!r}") from None
    except ValueError as error:
        raise BertImportError(f"BERT config: {error}") from None


def bert_state_dict(hf: dict[str, Tensor], config: BertConfig) -> dict[str, Tensor]:
    """qkv's state dict from a Hugging Face ``BertModel`` one (names with or without ``bert.``).

    Raises:
        BertImportError: a tensor is missing, or a name under the encoder is not a BERT weight
            (both listed).
    """
    prefix = "bert." if any(k.startswith("bert.") for k in hf) else ""
    names = dict(_EMBEDDINGS)
    for i in range(config.num_layers):
        for theirs, mine in _LAYER.items():
            for kind in ("weight", "bias"):
                names[f"encoder.layer.{i}.{theirs}.{kind}"] = f"encoder.layers.{i}.{mine}.{kind}"
    missing = sorted(prefix + k for k in names if prefix + k not in hf)
    ours = {prefix + k for k in names} | {prefix + b for b in BUFFERS}
    unexpected = sorted(k for k in hf if k.startswith(prefix) and k not in ours)
    hint = f"a different layout, or more layers than num_hidden_layers={config.num_layers}"
    hf_import.check_names(missing, unexpected, "BERT", BertImportError, hint)
    head = sorted(k for k in hf if not k.startswith(prefix))
    if head:
        logger.info("left out %d tensors of a task head: %s", len(head), ", ".join(head))
    return {mine: hf[prefix + theirs].contiguous() for theirs, mine in names.items()}


def _load(config: BertConfig, weights: dict[str, Tensor]) -> BertEncoder:
    model = BertEncoder(config)
    return hf_import.load_checked(model, bert_state_dict(weights, config), "BERT", BertImportError)


def from_hf_bert(hf_model: Any) -> BertEncoder:
    """A :class:`BertEncoder` with the weights of a ``transformers`` ``BertModel`` (or a task
    model around one), in eval mode."""
    return _load(bert_config(hf_model.config.to_dict()), hf_import.live_weights(hf_model))


def load_bert(folder: str | Path) -> BertEncoder:
    """A :class:`BertEncoder` from a saved Hugging Face BERT folder (``config.json`` and
    ``model.safetensors``), read with ``safetensors`` alone, in eval mode."""
    hf, weights = read_hf_folder(folder, "bert", BertImportError)
    try:
        config = bert_config(hf)
    except BertImportError as error:  # another kind of folder, or a broken config: name it
        raise BertImportError(f"{Path(folder) / 'config.json'}: {error}") from None
    return _load(config, weights)

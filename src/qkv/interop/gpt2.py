"""GPT-2 weights (Hugging Face ``GPT2LMHeadModel`` layout) into :class:`TransformerLM`.

Three ways in: :func:`from_hf_gpt2` takes a live ``transformers`` model; :func:`load_gpt2` reads
a saved Hugging Face folder (``config.json`` + ``model.safetensors``) without importing
``transformers``; :func:`gpt2_config` maps a ``GPT2Config`` dictionary to qkv's config.

The layouts differ in three ways. GPT-2's ``Conv1D`` stores weights as ``(in, out)``, the
transpose of ``nn.Linear``; its attention projects queries, keys and values with one fused
``c_attn`` of width ``3D``, split here into qkv's ``q_proj``/``k_proj``/``v_proj``; and its
output head is the token embedding (tied), which is how qkv builds it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from qkv.interop.hf_folder import read_hf_folder
from qkv.interop.hf_import import checked_activation, live_weights, load_checked
from qkv.models.language_model.model import TransformerLM, TransformerLMConfig

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
ACTIVATIONS["relu"] = "relu"
# GPT2Config options that change the computation in ways qkv does not implement.
UNSUPPORTED = {
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "scale_attn_weights": True,
    "add_cross_attention": False,
}


class GPT2ImportError(ValueError):
    """The GPT-2 weights or config cannot be represented by qkv's model (the reason is named)."""


def gpt2_config(hf: dict[str, Any]) -> TransformerLMConfig:
    """qkv's config for a ``GPT2Config`` dictionary (``config.json`` or ``to_dict()``)."""
    activation = checked_activation(
        hf,
        UNSUPPORTED,
        ACTIVATIONS,
        "GPT-2",
        GPT2ImportError,
        key="activation_function",
        default="gelu_new",
    )
    d_model = hf["n_embd"]
    return TransformerLMConfig(
        vocab_size=hf["vocab_size"],
        max_len=hf["n_positions"],
        d_model=d_model,
        num_heads=hf["n_head"],
        num_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * d_model,
        dropout=float(hf.get("resid_pdrop", 0.1)),
        positions="learned",
        activation=activation,
        tie_weights=True,
        layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
    )


def gpt2_state_dict(hf: dict[str, Tensor], config: TransformerLMConfig) -> dict[str, Tensor]:
    """qkv's state dict from a Hugging Face GPT-2 one (``GPT2LMHeadModel`` or ``GPT2Model``)."""
    prefix = "transformer." if any(k.startswith("transformer.") for k in hf) else ""
    d = config.d_model

    def get(name: str) -> Tensor:
        key = prefix + name
        if key not in hf:
            raise GPT2ImportError(f"GPT-2 weights lack {key!r}")
        return hf[key]

    state = {
        "embed.weight": get("wte.weight"),
        "positional.embedding.weight": get("wpe.weight"),
        "blocks.norm.weight": get("ln_f.weight"),
        "blocks.norm.bias": get("ln_f.bias"),
    }
    for i in range(config.num_layers):
        h, ours = f"h.{i}.", f"blocks.layers.{i}."
        qkv_weight = get(h + "attn.c_attn.weight").t()  # Conv1D (D, 3D) -> Linear (3D, D)
        qkv_bias = get(h + "attn.c_attn.bias")
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            state[ours + f"self_attn.{name}.weight"] = qkv_weight[j * d : (j + 1) * d]
            state[ours + f"self_attn.{name}.bias"] = qkv_bias[j * d : (j + 1) * d]
        pairs = {
            "attn.c_proj": "self_attn.out_proj",
            "mlp.c_fc": "ffn.linear1",
            "mlp.c_proj": "ffn.linear2",
        }
        for theirs, mine in pairs.items():
            state[ours + mine + ".weight"] = get(h + theirs + ".weight").t()
            state[ours + mine + ".bias"] = get(h + theirs + ".bias")
        for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm2")):
            state[ours + mine + ".weight"] = get(h + theirs + ".weight")
            state[ours + mine + ".bias"] = get(h + theirs + ".bias")
    head = hf.get("lm_head.weight")
    if head is not None and not torch.equal(head, state["embed.weight"]):
        raise GPT2ImportError("lm_head.weight differs from wte.weight: an untied head")
    state["output_proj.weight"] = state["embed.weight"]
    return {k: v.contiguous() for k, v in state.items()}


def _load(config: TransformerLMConfig, weights: dict[str, Tensor]) -> TransformerLM:
    model = TransformerLM(config)
    return load_checked(model, gpt2_state_dict(weights, config), "GPT-2", GPT2ImportError)


def from_hf_gpt2(hf_model: Any) -> TransformerLM:
    """A :class:`TransformerLM` with the weights of a ``transformers`` GPT-2 model (eval mode)."""
    return _load(gpt2_config(hf_model.config.to_dict()), live_weights(hf_model))


def load_gpt2(folder: str | Path) -> TransformerLM:
    """A :class:`TransformerLM` from a saved Hugging Face GPT-2 folder (``config.json`` and
    ``model.safetensors``), read with ``safetensors`` alone (eval mode)."""
    hf, weights = read_hf_folder(folder, "gpt2", GPT2ImportError, type_required=True)
    return _load(gpt2_config(hf), weights)

"""The decode step of :class:`.TransformerLM` (a prompt, then one token at a time), lean enough
for generation on a CPU.

Generating one token reads every weight once and does little arithmetic, so its cost is memory
traffic plus Python overhead, not FLOPs. The module path (``model(ids, caches=...)``) pays for
generality: a module call, shape and mask validation, and three separate projections per
attention layer. This step computes the same function in inference mode with

- one fused query/key/value projection per layer (one matrix product instead of three);
- every weight packed for the fastest kernel of its precision
  (:mod:`qkv.layers.packed_linear`: float32, bfloat16, or int8 weights by int8 activations);
- direct calls of ``layer_norm``, ``scaled_dot_product_attention`` and ``addmm``.

The prepared weights are copies taken when :class:`DecodeWeights` is built;
:meth:`.TransformerLM.decode_weights` keeps them until a parameter changes.
``tests/decoding/test_sampling.py`` checks that generation through this step equals the module
path, token for token and in logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import causal_mask, combine_masks
from qkv.layers.feedforward import ACTIVATIONS
from qkv.layers.packed_linear import (
    PackedLinear,
    Precision,
    activation_dtype,
    check_precision,
    fused,
    linear,
    pack,
)


@dataclass(frozen=True)
class _Layer:
    norm1: tuple[Tensor, Tensor]
    qkv: PackedLinear  # D -> (H + 2 Hkv) Dh
    out: PackedLinear  # H Dv -> D
    norm2: tuple[Tensor, Tensor]
    fc1: PackedLinear  # D -> F
    fc2: PackedLinear  # F -> D


def _qkv(attention) -> list[torch.nn.Linear]:
    return [attention.q_proj, attention.k_proj, attention.v_proj]


def _norm(norm: torch.nn.LayerNorm) -> tuple[Tensor, Tensor]:
    return norm.weight.detach(), norm.bias.detach()


class DecodeWeights:
    """Packed, fused copies of a :class:`.TransformerLM`'s weights for :func:`decode_step`, in
    ``precision`` (:mod:`qkv.layers.packed_linear`: bfloat16 halves the bytes each token reads,
    int8 quarters them; LayerNorms, embeddings and the residual stream stay float32)."""

    def __init__(self, model, precision: Precision = "float32") -> None:
        self.model, self.precision = model, check_precision(precision)
        self.dtype = activation_dtype(self.precision)  # of the caches and linear inputs
        self.layers = [
            _Layer(
                _norm(block.norm1),
                fused(_qkv(block.self_attn), self.precision),
                pack(block.self_attn.out_proj.weight, block.self_attn.out_proj.bias, precision),
                _norm(block.norm2),
                pack(block.ffn.linear1.weight, block.ffn.linear1.bias, precision),
                pack(block.ffn.linear2.weight, block.ffn.linear2.bias, precision),
            )
            for block in model.blocks.layers
        ]
        self.final_norm = _norm(model.blocks.norm)
        self.output = pack(model.output_proj.weight, None, precision)  # D -> V
        self.activation = ACTIVATIONS[model.config.activation]

    @property
    def nbytes(self) -> int:
        """Bytes of the packed weights a decoded token reads (the embedding rows it looks up
        excepted)."""
        linears = [self.output, *(p for layer in self.layers for p in
                                  (layer.qkv, layer.out, layer.fc1, layer.fc2))]  # fmt: skip
        norms = [t for layer in self.layers for t in (*layer.norm1, *layer.norm2)]
        return sum(p.nbytes for p in linears) + sum(t.numel() * 4 for t in norms)


def decode_step(
    weights: DecodeWeights,
    ids: Tensor,
    caches: list[KVCache],
    *,
    keep: Tensor | None,
    positions: Tensor,
) -> Tensor:
    """Logits ``(B, V)`` (float32) for the position after the last of ``ids (B, T)``, appending
    the ``T`` new keys and values to ``caches`` (which must hold ``weights.dtype``).

    ``keep``: ``(B, cached + T)`` boolean over the cached keys and the new ones (``None``: all
    real); ``positions``: ``(B, T)`` per row, or ``(T,)`` shared by all. A padding query (left
    padding in a prompt) attends to itself, so every row stays finite; no real token ever
    attends to padding.
    """
    model = weights.model
    c = model.config
    b, t = ids.shape
    h, hkv, dh = c.num_heads, c.num_kv_heads or c.num_heads, c.head_dim
    eps, dtype, width = c.layer_norm_eps, weights.dtype, c.d_model
    x = model.embed.weight[ids]  # (B, T, D) float32: the residual stream
    if model.positional is not None:
        x = x + model.positional.embedding.weight[positions]
    s = caches[0].length + t
    mask = None
    if t > 1:  # bottom-right causal, plus each query's own key
        mask = causal_mask(t, s, device=ids.device)  # (T, S)
    if keep is not None:
        own = torch.zeros(t, s, dtype=torch.bool, device=ids.device)
        own[:, s - t :] = torch.eye(t, dtype=torch.bool, device=ids.device)
        mask = combine_masks(mask, keep[:, None, None, :])
        assert mask is not None  # keep is a tensor
        mask = mask | own  # (B, 1, T, S)
    rotary = model.blocks.layers[0].self_attn.rotary
    for layer, cache in zip(weights.layers, caches, strict=True):
        y = F.layer_norm(x, (width,), *layer.norm1, eps).to(dtype).view(b * t, width)
        qkv = linear(y, layer.qkv).view(b, t, h + 2 * hkv, dh)
        q = qkv[:, :, :h].transpose(1, 2)  # (B, H, T, Dh)
        k = qkv[:, :, h : h + hkv].transpose(1, 2)  # (B, Hkv, T, Dh)
        v = qkv[:, :, h + hkv :].transpose(1, 2)
        if rotary is not None:
            q, k = rotary(q, positions), rotary(k, positions)
        k, v = cache.update(k, v)  # (B, Hkv, S, Dh)
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=h != hkv
        )  # (B, H, T, Dh)
        context = context.transpose(1, 2).reshape(b * t, h * dh)
        x = x + linear(context, layer.out).view(b, t, width).float()
        y = F.layer_norm(x, (width,), *layer.norm2, eps).to(dtype).view(b * t, width)
        hidden = weights.activation(linear(y, layer.fc1))
        x = x + linear(hidden, layer.fc2).view(b, t, width).float()
    last = F.layer_norm(x[:, -1], (width,), *weights.final_norm, eps).to(dtype)  # (B, D)
    return linear(last, weights.output).float()  # (B, V)

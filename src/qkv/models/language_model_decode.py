"""The decode step of :class:`TransformerLM` (a prompt, then one token at a time), lean enough
for generation on a CPU.

Generating one token reads every weight once and does little arithmetic, so its cost is memory
traffic plus Python overhead, not FLOPs. The module path (``model(ids, caches=...)``) pays for
generality: a module call, shape and mask validation, and three separate projections per
attention layer. This step computes the same function in inference mode with

- one fused query/key/value projection per layer (one matrix product instead of three);
- every weight laid out for the fastest kernel of its dtype (:func:`_layout`): float32 weights
  transposed to ``(D_in, D_out)``, so a product with one row reads them in storage order, 2-3x
  faster than ``F.linear`` on this kind of CPU; bfloat16 weights as they are, read by the
  matrix-vector kernel for a single row;
- direct calls of ``layer_norm``, ``scaled_dot_product_attention`` and ``addmm``.

The prepared weights are copies taken when :class:`DecodeWeights` is built;
:meth:`TransformerLM.decode_weights` keeps them until a parameter changes.
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


@dataclass(frozen=True)
class _Layer:
    norm1: tuple[Tensor, Tensor]
    qkv_t: Tensor  # (D, (H + 2 Hkv) Dh)
    qkv_bias: Tensor | None
    out_t: Tensor  # (H Dv, D)
    out_bias: Tensor | None
    norm2: tuple[Tensor, Tensor]
    fc1_t: Tensor  # (D, F)
    fc1_bias: Tensor | None
    fc2_t: Tensor  # (F, D)
    fc2_bias: Tensor | None


def _layout(weight: Tensor, dtype: torch.dtype) -> Tensor:
    """The weight ``(D_out, D_in)`` as :func:`_linear` reads it fastest in ``dtype``: float32
    transposed to ``(D_in, D_out)``; other dtypes as they are (their matrix-vector kernel reads
    ``(D_out, D_in)`` at full memory bandwidth, their ``x @ W.T`` kernel does not)."""
    weight = weight.detach().to(dtype)
    return (weight.t() if dtype == torch.float32 else weight).contiguous()


def _t(linear: torch.nn.Linear, dtype: torch.dtype) -> tuple[Tensor, Tensor | None]:
    bias = None if linear.bias is None else linear.bias.detach().to(dtype)
    return _layout(linear.weight, dtype), bias


class DecodeWeights:
    """Transposed, fused copies of a :class:`TransformerLM`'s weights for :func:`decode_step`,
    in ``dtype`` (bfloat16 halves the bytes each token reads; LayerNorms and the residual
    stream stay float32)."""

    def __init__(self, model, dtype: torch.dtype = torch.float32) -> None:
        self.model, self.dtype = model, dtype
        layers = []
        for block in model.blocks.layers:
            att, ffn = block.self_attn, block.ffn
            weights = [att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]
            qkv_t = _layout(torch.cat([w.detach() for w in weights], dim=0), dtype)
            biases = [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]
            qkv_bias = None
            if biases[0] is not None:
                qkv_bias = torch.cat([b.detach() for b in biases]).to(dtype)
            out_t, out_bias = _t(att.out_proj, dtype)
            fc1_t, fc1_bias = _t(ffn.linear1, dtype)
            fc2_t, fc2_bias = _t(ffn.linear2, dtype)
            layers.append(
                _Layer(
                    (block.norm1.weight.detach(), block.norm1.bias.detach()),
                    qkv_t,
                    qkv_bias,
                    out_t,
                    out_bias,
                    (block.norm2.weight.detach(), block.norm2.bias.detach()),
                    fc1_t,
                    fc1_bias,
                    fc2_t,
                    fc2_bias,
                )
            )
        self.layers = layers
        norm = model.blocks.norm
        self.final_norm = (norm.weight.detach(), norm.bias.detach())
        self.output_t = _layout(model.output_proj.weight, dtype)  # (D, V) or (V, D)
        self.activation = ACTIVATIONS[model.config.activation]


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x (N, D_in)`` through a weight laid out by :func:`_layout`: ``(N, D_out)``."""
    if x.dtype == torch.float32:  # weight (D_in, D_out)
        return x @ weight if bias is None else torch.addmm(bias, x, weight)
    if x.size(0) == 1:  # one row: the matrix-vector kernel, weight (D_out, D_in)
        out = torch.mv(weight, x[0])
        return (out if bias is None else out + bias)[None]
    return F.linear(x, weight, bias)


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
        mask = combine_masks(mask, keep[:, None, None, :]) | own  # (B, 1, T, S)
    rotary = model.blocks.layers[0].self_attn.rotary
    for layer, cache in zip(weights.layers, caches, strict=True):
        y = F.layer_norm(x, (width,), *layer.norm1, eps).to(dtype).view(b * t, width)
        qkv = _linear(y, layer.qkv_t, layer.qkv_bias).view(b, t, h + 2 * hkv, dh)
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
        x = x + _linear(context, layer.out_t, layer.out_bias).view(b, t, width).float()
        y = F.layer_norm(x, (width,), *layer.norm2, eps).to(dtype).view(b * t, width)
        hidden = weights.activation(_linear(y, layer.fc1_t, layer.fc1_bias))
        x = x + _linear(hidden, layer.fc2_t, layer.fc2_bias).view(b, t, width).float()
    last = F.layer_norm(x[:, -1], (width,), *weights.final_norm, eps).to(dtype)  # (B, D)
    return _linear(last, weights.output_t, None).float()  # (B, V)

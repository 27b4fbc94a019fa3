"""The one-token decode step of :class:`TransformerLM`, lean enough for generation on a CPU.

Generating one token reads every weight once and does little arithmetic, so its cost is memory
traffic plus Python overhead, not FLOPs. The module path (``model(ids, caches=...)``) pays for
generality: a module call, shape and mask validation, and three separate projections per
attention layer. This step computes the same function in inference mode with

- one fused query/key/value projection per layer (one matrix product instead of three);
- every weight stored transposed and contiguous, ``(D_in, D_out)``: a product with one row then
  reads the weight in storage order, 2-3x faster than ``F.linear`` on this kind of CPU;
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


def _t(linear: torch.nn.Linear) -> tuple[Tensor, Tensor | None]:
    bias = None if linear.bias is None else linear.bias.detach()
    return linear.weight.detach().t().contiguous(), bias


class DecodeWeights:
    """Transposed, fused copies of a :class:`TransformerLM`'s weights for :func:`decode_step`."""

    def __init__(self, model) -> None:
        self.model = model
        layers = []
        for block in model.blocks.layers:
            att, ffn = block.self_attn, block.ffn
            weights = [att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]
            qkv_t = torch.cat([w.detach() for w in weights], dim=0).t().contiguous()
            biases = [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]
            qkv_bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])
            out_t, out_bias = _t(att.out_proj)
            fc1_t, fc1_bias = _t(ffn.linear1)
            fc2_t, fc2_bias = _t(ffn.linear2)
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
        self.output_t = model.output_proj.weight.detach().t().contiguous()  # (D, V)
        self.activation = ACTIVATIONS[model.config.activation]


def _linear(x: Tensor, weight_t: Tensor, bias: Tensor | None) -> Tensor:
    return x @ weight_t if bias is None else torch.addmm(bias, x, weight_t)


def decode_step(
    weights: DecodeWeights,
    ids: Tensor,
    caches: list[KVCache],
    *,
    keep: Tensor | None,
    positions: Tensor,
) -> Tensor:
    """Logits ``(B, V)`` of the token after ``ids (B, 1)``, appending to ``caches``.

    ``keep``: ``(B, cached + 1)`` boolean over the cached keys and this one (``None``: all
    real); ``positions``: ``(B,)`` position of each new token, or ``(1,)`` shared by all.
    """
    model = weights.model
    c = model.config
    b = ids.size(0)
    h, hkv, dh = c.num_heads, c.num_kv_heads or c.num_heads, c.head_dim
    eps = c.layer_norm_eps
    x = model.embed.weight[ids[:, 0]]  # (B, D)
    if model.positional is not None:
        x = x + model.positional.embedding.weight[positions.reshape(-1)].expand_as(x)
    mask = None if keep is None else keep[:, None, None, :]  # (B, 1, 1, S)
    rotary = model.blocks.layers[0].self_attn.rotary
    # (T,) = (1,) shared by the batch, or (B, T) = (B, 1) per row, as RotaryEmbedding takes them
    rotary_positions = positions.reshape(-1, 1) if positions.numel() > 1 else positions.reshape(1)
    for layer, cache in zip(weights.layers, caches, strict=True):
        y = F.layer_norm(x, (c.d_model,), *layer.norm1, eps)
        qkv = _linear(y, layer.qkv_t, layer.qkv_bias)  # (B, (H + 2 Hkv) Dh)
        q = qkv[:, : h * dh].view(b, h, 1, dh)
        k = qkv[:, h * dh : (h + hkv) * dh].view(b, hkv, 1, dh)
        v = qkv[:, (h + hkv) * dh :].view(b, hkv, 1, dh)
        if rotary is not None:
            q, k = rotary(q, rotary_positions), rotary(k, rotary_positions)
        k, v = cache.update(k, v)  # (B, Hkv, S, Dh)
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=h != hkv
        )  # (B, H, 1, Dh)
        x = x + _linear(context.reshape(b, h * dh), layer.out_t, layer.out_bias)
        y = F.layer_norm(x, (c.d_model,), *layer.norm2, eps)
        hidden = weights.activation(_linear(y, layer.fc1_t, layer.fc1_bias))
        x = x + _linear(hidden, layer.fc2_t, layer.fc2_bias)
    x = F.layer_norm(x, (c.d_model,), *weights.final_norm, eps)
    return x @ weights.output_t  # (B, V)

"""BERT inference on the real tokens only: the same function as :class:`.BertEncoder`'s module
path, lean enough to encode sentences quickly on a CPU.

A batch of sentences of different lengths is padded to the longest; on the module path every
matrix product (about 95% of the work in a MiniLM-sized encoder) and attention also run on the
padding, whose outputs are thrown away. Here the tokens are *packed*: the ``L = sum(lengths)``
real tokens form one ``(L, D)`` matrix that every matrix product works on, and attention runs
per run of equal-length sentences (sorted input makes these runs long), each an unpadded
``(rows, H, T, Dh)`` batch with no mask at all:

    (L, D) --fused QKV--> (L, 3D) --attention within each sentence--> (L, D)
        --out proj, +, LN--> (L, D) --FFN, +, LN--> (L, D)

Besides skipping the padding, it saves the module path's overhead: one fused query/key/value
product per layer instead of three; weights transposed once to ``(D_in, D_out)`` for ``addmm``;
residual sums accumulated in place (``addmm_``) and buffers reused across layers, since each
fresh large tensor costs page faults on a CPU (measured: 60,000 per 15,000 tokens, gone with
reuse); direct calls of ``layer_norm`` and ``scaled_dot_product_attention`` without the module
path's validation. :meth:`.BertEncoder.fast_weights` keeps the prepared copies until a parameter
changes. ``tests/models/bert/test_model.py`` checks that the result equals the module path's (1e-5),
``tests/interop/test_bert.py`` that it equals Hugging Face's ``BertModel``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

# In-place versions of qkv.layers.feedforward.ACTIVATIONS (same functions, no new tensor).
INPLACE_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": torch.relu_,
    "gelu": torch.ops.aten.gelu_,
    "gelu_tanh": partial(torch.ops.aten.gelu_, approximate="tanh"),
}


@dataclass(frozen=True)
class _Layer:
    qkv_t: Tensor  # (D, 3D): query, key, value projections side by side
    qkv_bias: Tensor  # (3D,)
    out_t: Tensor  # (D, D)
    out_bias: Tensor
    norm1: tuple[Tensor, Tensor]
    fc1_t: Tensor  # (D, F)
    fc1_bias: Tensor
    fc2_t: Tensor  # (F, D)
    fc2_bias: Tensor
    norm2: tuple[Tensor, Tensor]


class FastWeights:
    """Transposed, fused float32 copies of a :class:`.BertEncoder`'s weights for
    :func:`packed_hidden`."""

    def __init__(self, model) -> None:
        def t(linear) -> tuple[Tensor, Tensor]:
            return linear.weight.detach().t().contiguous(), linear.bias.detach().clone()

        layers: list[_Layer] = []
        for block in model.encoder.layers:
            att, ffn = block.self_attn, block.ffn
            projections = (att.q_proj, att.k_proj, att.v_proj)
            qkv_t = torch.cat([p.weight.detach() for p in projections]).t().contiguous()
            qkv_bias = torch.cat([p.bias.detach() for p in projections])
            layers.append(
                _Layer(
                    qkv_t,
                    qkv_bias,
                    *t(att.out_proj),
                    (block.norm1.weight.detach(), block.norm1.bias.detach()),
                    *t(ffn.linear1),
                    *t(ffn.linear2),
                    (block.norm2.weight.detach(), block.norm2.bias.detach()),
                )
            )
        self.layers = layers
        self.activation_ = INPLACE_ACTIVATIONS[model.config.activation]


def packed_hidden(model, ids: Tensor, lengths: Tensor) -> Tensor:
    """Hidden states ``(L, D)`` of the real tokens of ``ids (B, T)`` (the first ``lengths[b]``
    of row ``b``), row after row; inputs are validated by :meth:`.BertEncoder.packed_hidden`."""
    c = model.config
    weights: FastWeights = model.fast_weights()
    t = ids.size(1)
    d, eps = c.hidden_size, c.layer_norm_eps
    positions = torch.arange(t, device=ids.device)  # (T,)
    index = (positions[None, :] < lengths[:, None]).flatten().nonzero().squeeze(1)  # (L,)
    x = model.word_embeddings.weight[ids.flatten()[index]]  # (L, D)
    x += model.position_embeddings.weight[index % t] + model.token_type_embeddings.weight[0]
    x = F.layer_norm(x, (d,), model.embed_norm.weight, model.embed_norm.bias, eps)
    blocks = _blocks(lengths.tolist())
    n = x.size(0)
    # Buffers reused by every layer: fresh large tensors cost page faults on each allocation.
    qkv, context = x.new_empty(n, 3 * d), x.new_empty(n, d)
    hidden = x.new_empty(n, c.intermediate_size)
    for layer in weights.layers:
        torch.addmm(layer.qkv_bias, x, layer.qkv_t, out=qkv)  # (L, 3D)
        _attend(qkv, blocks, c.num_heads, out=context)  # (L, D)
        x.add_(layer.out_bias).addmm_(context, layer.out_t)  # x + Attn(x), in place
        x = F.layer_norm(x, (d,), *layer.norm1, eps)
        torch.addmm(layer.fc1_bias, x, layer.fc1_t, out=hidden)  # (L, F)
        weights.activation_(hidden)
        x.add_(layer.fc2_bias).addmm_(hidden, layer.fc2_t)  # x + FFN(x), in place
        x = F.layer_norm(x, (d,), *layer.norm2, eps)
    return x


def _blocks(lengths: list[int]) -> list[tuple[int, int, int]]:
    """Runs of equal length in the packed tokens: ``(first token, rows, length)``."""
    blocks: list[tuple[int, int, int]] = []
    start = 0
    for length in lengths:
        if blocks and blocks[-1][2] == length:
            first, rows, _ = blocks[-1]
            blocks[-1] = (first, rows + 1, length)
        else:
            blocks.append((start, 1, length))
        start += length
    return blocks


def _attend(qkv: Tensor, blocks: list[tuple[int, int, int]], heads: int, *, out: Tensor) -> None:
    """Self-attention within each sentence of the packed ``qkv (L, 3D)`` into ``out (L, D)``.

    Sentences of one length form one ``(rows, H, T, Dh)`` batch: no padding, so no mask and no
    work spent on it."""
    d = out.size(1)
    for first, rows, length in blocks:
        span = slice(first, first + rows * length)
        q, k, v = qkv[span].view(rows, length, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        context = F.scaled_dot_product_attention(q, k, v)  # (rows, H, T, Dh)
        out[span].view(rows, length, heads, d // heads).copy_(context.transpose(1, 2))

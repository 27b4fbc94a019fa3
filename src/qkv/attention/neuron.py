"""The data of a neuron view (Vig 2019, "A Multiscale Visualization of Attention in the
Transformer Model", bertviz's neuron view): how one query and one key make one attention weight.

For query head ``h`` at position ``i`` and key position ``j``, with the module's own projections
(and rotary embedding, when it has one):

    q = (x_i W^Q)_h,  k = (x_j W^K)_g        g = h // (H / Hkv), the key head of h (GQA)
    score = sum(q * k),  scaled = score / sqrt(Dk),  weight = softmax_j'(scaled_j' + bias)_j

the softmax running over every key ``j'`` the mask keeps (Vaswani et al. 2017, eq. 1). The weight
is the one :class:`~qkv.attention.multihead.MultiHeadAttention` returns with ``need_weights``
(before dropout, i.e. in ``eval()`` mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from qkv.attention.core import masked_softmax
from qkv.attention.masks import causal_mask, check_keep
from qkv.attention.multihead import MultiHeadAttention

__all__ = ["NeuronView", "head_vectors", "neuron_view"]


@dataclass(frozen=True)
class NeuronView:
    """One query-key pair of one head, from the vectors to the weight.

    ``query``, ``key`` and ``product`` are ``(Dk,)`` float tensors (detached, rotary applied);
    ``weights`` is the head's whole ``(Tk,)`` row for the query, ``weight`` its entry ``j``.
    """

    head: int
    kv_head: int
    query_position: int
    key_position: int
    query: Tensor
    key: Tensor
    product: Tensor
    score: float
    scale: float
    scaled: float
    weight: float
    weights: Tensor


def neuron_view(
    module: MultiHeadAttention,
    query: Tensor,
    key: Tensor | None = None,
    *,
    head: int,
    query_position: int,
    key_position: int,
    batch: int = 0,
    keep: Tensor | None = None,
    bias: Tensor | None = None,
    is_causal: bool = False,
    positions: Tensor | None = None,
) -> NeuronView:
    """Recompute one head's query/key vectors and weight for one pair of positions.

    Args:
        module: the layer's :class:`MultiHeadAttention`.
        query: the layer's query input ``(B, Tq, D)``, as passed to ``module``.
        key: its key input ``(B, Tk, kdim)`` for cross-attention; ``None`` for self-attention.
        head: the query head ``h`` in ``[0, H)``.
        query_position: ``i`` in ``[0, Tq)``.
        key_position: ``j`` in ``[0, Tk)``.
        batch: which sequence of the batch.
        keep: as passed to ``module`` (no cache: the whole sequence).
        bias: as passed to ``module``.
        is_causal: as passed to ``module``.
        positions: as passed to ``module``.

    Returns:
        a :class:`NeuronView`.
    """
    if not isinstance(module, MultiHeadAttention):
        raise TypeError(f"neuron_view needs a qkv MultiHeadAttention, got {type(module).__name__}")
    check_keep(keep, has_bias=True)
    module._check(query, key, None, None)
    source = query if key is None else key
    b, tq, tk = query.size(0), query.size(1), source.size(1)
    _check_index("batch", batch, b)
    _check_index("head", head, module.num_heads)
    _check_index("query_position", query_position, tq)
    _check_index("key_position", key_position, tk)
    with torch.no_grad():
        rows = slice(batch, batch + 1)
        if positions is not None and positions.dim() == 2:
            positions = positions[rows]
        q, k = head_vectors(module, query[rows], None if key is None else key[rows], positions)
        kv_head = head // (module.num_heads // module.num_kv_heads)
        q_row = q[0, head, query_position]  # (Dk,)
        keys = k[0, kv_head]  # (Tk, Dk)
        scale = 1.0 / math.sqrt(module.d_k)  # MultiHeadAttention's score is ScaledDot
        energies = (keys @ q_row) * scale  # (Tk,)
        allowed = _row(keep, batch, head, query_position, (b, module.num_heads, tq, tk))
        if is_causal:
            causal = causal_mask(tq, tk, device=query.device)[query_position]  # (Tk,)
            allowed = causal if allowed is None else allowed & causal
        added = _row(bias, batch, head, query_position, (b, module.num_heads, tq, tk))
        weights = masked_softmax(energies if added is None else energies + added, allowed)
        product = q_row * keys[key_position]  # (Dk,)
    return NeuronView(
        head=head,
        kv_head=kv_head,
        query_position=query_position,
        key_position=key_position,
        query=q_row,
        key=keys[key_position],
        product=product,
        score=float(product.sum()),
        scale=scale,
        scaled=float(product.sum()) * scale,
        weight=float(weights[key_position]),
        weights=weights,
    )


def head_vectors(
    module: MultiHeadAttention,
    query: Tensor,
    key: Tensor | None = None,
    positions: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Every head's query and key vectors, as ``module`` scores them (rotary applied).

    Shape:
        query ``(B, Tq, D)``, key ``(B, Tk, kdim)`` or ``None`` (self-attention) ->
        ``q (B, H, Tq, Dk)``, ``k (B, Hkv, Tk, Dk)``.
    """
    source = query if key is None else key
    b, tq, tk = query.size(0), query.size(1), source.size(1)
    with torch.no_grad():
        q = module.q_proj(query).view(b, tq, module.num_heads, module.d_k).transpose(1, 2)
        k = module.k_proj(source).view(b, tk, module.num_kv_heads, module.d_k).transpose(1, 2)
        if module.rotary is not None:  # self-attention only, no cache: positions 0 .. T-1
            pos = torch.arange(tq, device=query.device) if positions is None else positions
            q, k = module.rotary(q, pos), module.rotary(k, pos)  # (B, H|Hkv, T, Dk)
    return q, k


def _check_index(name: str, value: int, size: int) -> None:
    if not 0 <= value < size:
        raise ValueError(f"{name}={value} is out of range; pass 0 <= {name} < {size}")


def _row(
    mask: Tensor | None, batch: int, head: int, position: int, shape: tuple[int, int, int, int]
) -> Tensor | None:
    """The ``(Tk,)`` row of a keep-mask or bias broadcastable to ``shape = (B, H, Tq, Tk)``."""
    if mask is None:
        return None
    try:
        full = torch.broadcast_to(mask, shape)  # (B, H, Tq, Tk), a view
    except RuntimeError as err:
        raise ValueError(
            f"keep/bias of shape {tuple(mask.shape)} does not broadcast to (B, H, Tq, Tk) = {shape}"
        ) from err
    return full[batch, head, position]

"""ALiBi, Press et al. 2022, "Train Short, Test Long", section 3: ``softmax(q_i K^T + m * b_i)``.

Instead of adding positions to the embeddings, each head ``h`` adds a linear penalty
``-m_h * (i - j)`` to the score of query ``i`` for key ``j``, with a fixed head-specific slope
``m_h`` (a geometric sequence, :func:`alibi_slopes`). There are no parameters and no maximum
length.

The bias is meant to be passed as ``bias=`` to :func:`qkv.attention.core.attend` together with
the causal mask (``is_causal=True``), as in the paper's causal language models.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["alibi_bias", "alibi_slopes"]


def alibi_slopes(num_heads: int) -> Tensor:
    """The per-head slopes ``m_h`` of Press et al. 2022, section 3.

    For ``n`` a power of two, the geometric sequence starting at and with ratio ``2^(-8/n)``:
    ``m_h = 2^(-8 h / n)``, ``h = 1 .. n`` (``1/2, 1/4, ..., 1/256`` for 8 heads). For other ``n``,
    the rule of the paper's footnote and official code: the ``2^k`` slopes of the largest power of
    two ``2^k < n``, followed by every other slope of ``2^(k+1)`` heads (the 1st, 3rd, 5th, ...)
    until ``n`` are chosen. The result is therefore not sorted for such ``n``.

    Args:
        num_heads: ``H >= 1``.

    Returns:
        ``(H,)`` float32.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
    lower = 1 << (num_heads.bit_length() - 1)  # largest power of two <= num_heads
    slopes = _power_of_two_slopes(lower)
    if lower < num_heads:
        slopes += _power_of_two_slopes(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(slopes, dtype=torch.float32)  # (H,)


def alibi_bias(
    num_heads: int,
    tq: int,
    tk: int,
    *,
    device: torch.device | str | None = None,
) -> Tensor:
    """The ALiBi additive bias ``-m_h * |q_pos(i) - j|`` for every head, query and key.

    Query ``i`` sits at absolute position ``q_pos(i) = tk - tq + i`` (bottom-right alignment, like
    :func:`qkv.attention.masks.causal_mask`): the queries are the last ``tq`` positions of the
    ``tk`` keys, which is what cached decoding needs.

    Combine it with the causal mask (``attend(..., bias=alibi_bias(...)[None], is_causal=True)``).
    On the keys the causal mask allows (``j <= q_pos(i)``) the bias equals the paper's
    ``-m_h * (q_pos(i) - j)`` exactly. On future keys it uses the distance ``|q_pos(i) - j|``
    rather than the signed one: without a causal mask that is the symmetric, bidirectional
    variant, and it never *rewards* a future key, so a forgotten mask degrades gracefully instead
    of making every query look ahead.

    Adding a constant to a row does not change its softmax, so this bias gives the same attention
    as the official implementation's ``m_h * j`` (which drops the per-row ``-m_h * q_pos(i)``).

    Args:
        num_heads: ``H >= 1``.
        tq: number of queries ``Tq >= 0``.
        tk: number of keys ``Tk >= 0``.
        device: where to build the bias.

    Returns:
        ``(H, Tq, Tk)`` float32; add a batch dim (``[None]``) to broadcast to ``(B, H, Tq, Tk)``.
    """
    slopes = alibi_slopes(num_heads).to(device)  # (H,)
    if tq < 0 or tk < 0:
        raise ValueError(f"alibi_bias needs non-negative lengths, got tq={tq}, tk={tk}")
    q_pos = torch.arange(tk - tq, tk, device=device)  # (Tq,) absolute query positions
    k_pos = torch.arange(tk, device=device)  # (Tk,)
    distance = (q_pos[:, None] - k_pos[None, :]).abs().float()  # (Tq, Tk)
    return -slopes[:, None, None] * distance[None]  # (H, Tq, Tk)


def _power_of_two_slopes(n: int) -> list[float]:
    """``2^(-8 h / n)`` for ``h = 1 .. n``: start and ratio ``2^(-8/n)`` (n a power of two)."""
    return [math.pow(2.0, -8.0 * h / n) for h in range(1, n + 1)]

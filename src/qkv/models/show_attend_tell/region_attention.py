"""The attention step of Show, Attend and Tell (Xu et al. 2015) over the regions ``a_i`` of a
strip, from the decoder state ``h_{t-1}``:

    e_ti = f_att(a_i, h_{t-1}) = v^T tanh(W h_{t-1} + U a_i)      alpha_t = softmax(e_t)  (4, 5)
    soft:  z_t = beta_t sum_i alpha_ti a_i,  beta_t = sigmoid(f_beta(h_{t-1}))   (eq. 13, 4.2.1)
    hard:  s_t ~ Multinoulli(alpha_t),  z_t = beta_t a_{s_t}                     (eq. 8, 9)

Both run through qkv's attention: soft attention is :func:`qkv.attention.core.attend` with the
:class:`~qkv.attention.scores.Additive` score; hard attention is
:class:`qkv.attention.hard.HardAttention` (REINFORCE mode: sample in training, the most likely
region in eval) on the same score. In training the hard model can be told, per strip, to use the
expected (soft) context instead of a sample (section 4.1: "with probability 0.5 ... set to its
expected value"). The modules are the captioner's, passed in; nothing here holds parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.core import attend
from qkv.attention.hard import HardAttention
from qkv.attention.scores import Additive


@dataclass(frozen=True)
class AttentionStep:
    """One word's attention: the gated context ``z_t (B, D)`` (eq. 13's ``beta * sum alpha a``
    for soft attention, the chosen region's for hard), ``alpha (B, R)`` and, for hard attention
    only, the chosen region ``choice (B,)``, its differentiable ``log_prob (B,)`` (0 where the
    expected context was used) and the ``entropy (B,)`` of ``alpha`` in nats."""

    context: Tensor
    alpha: Tensor
    choice: Tensor | None = None
    log_prob: Tensor | None = None
    entropy: Tensor | None = None


def soft_context(
    query: Tensor, regions: Tensor, prepared: Tensor, keep: Tensor, score: Additive
) -> tuple[Tensor, Tensor]:
    """Soft attention through the core: the context ``(B, D)`` and ``alpha (B, R)`` of
    ``query (B, 1, hidden)`` over ``regions (B, R, D)`` (``prepared``: the score's ``U a``)."""
    out = attend(
        query,
        regions,
        regions,
        score=score,
        keep=keep,
        need_weights=True,
        prepared_key=prepared,
    )  # context (B, 1, D), weights (B, 1, R)
    assert out.weights is not None  # need_weights=True
    return out.context[:, 0], out.weights[:, 0]


def attend_regions(
    h: Tensor,
    regions: Tensor,
    prepared: Tensor,
    keep: Tensor,
    *,
    score: Additive,
    gate: nn.Linear,
    hard: HardAttention | None,
    expected: Tensor | None = None,
) -> AttentionStep:
    """The attention of the next word from the decoder state ``h (B, hidden)``.

    Args:
        regions: ``(B, R, D)`` regions.
        prepared: the score's ``U a (B, R, A)``.
        keep: ``(B, 1, R)`` (``True`` at real regions).
        score: ``f_att``; gate: ``f_beta``; hard: the hard attention module (``None``: soft).
        expected: ``(B,)`` bool: these strips take the expected context (hard attention in
            training only).
    """
    query = h[:, None, :]  # (B, 1, hidden)
    beta = torch.sigmoid(gate(h))  # (B, 1)
    if hard is None:
        context, alpha = soft_context(query, regions, prepared, keep, score)
        return AttentionStep(beta * context, alpha)
    chosen = hard(query, regions, regions, keep=keep, prepared_key=prepared)
    probs = chosen.probs[:, 0]  # (B, R), float32 or wider
    log_p = probs.clamp_min(torch.finfo(probs.dtype).tiny).log()
    entropy = -(probs * log_p).sum(-1)  # (B,); padded regions add 0 * log(tiny) = 0
    context, log_prob = chosen.context[:, 0], chosen.log_prob[:, 0]
    if expected is not None and bool(expected.any()):
        # These strips take the expected context: nothing sampled, no REINFORCE term.
        soft = soft_context(query, regions, prepared, keep, score)[0]
        context = torch.where(expected[:, None], soft, context)
        log_prob = log_prob.masked_fill(expected, 0.0)
    alpha = probs.to(context.dtype)
    return AttentionStep(beta * context, alpha, chosen.index[:, 0], log_prob, entropy)

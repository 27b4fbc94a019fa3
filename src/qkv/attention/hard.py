"""Hard (stochastic) attention, Xu et al. 2015, "Show, Attend and Tell", section 4.1.

Instead of the expected context ``sum_i a_i v_i``, hard attention picks one position
``s ~ Multinoulli(a)`` and returns ``v_s``. The choice is not differentiable, so training uses the
REINFORCE estimator of eq. (12), ``d/dW log p(s | a)`` times a reward, for which
:class:`HardAttention` returns ``log_prob``. At evaluation the most likely position is taken
(argmax). The straight-through Gumbel-softmax relaxation (Jang et al. 2017) is offered as an
alternative that gives gradients directly: a one-hot choice forward, the soft sample's gradient
backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.attention.core import masked_softmax
from qkv.attention.masks import as_4d, check_keep, check_mask
from qkv.attention.scores import Score, check_prepared


@dataclass(frozen=True)
class HardAttentionOutput:
    """What hard attention returns.

    Attributes:
        context: ``(B, [H,] Tq, Dv)``, the value at the chosen position (zero for empty rows).
        weights: ``(B, [H,] Tq, Tk)`` one-hot choice (zero rows where no key is allowed).
        probs: ``(B, [H,] Tq, Tk)`` float32 attention distribution the choice was drawn from.
        index: ``(B, [H,] Tq)`` chosen key position (0 for empty rows).
        log_prob: ``(B, [H,] Tq)`` float32 ``log p(index)``, differentiable with respect to the
            score's parameters and the inputs (0 for empty rows): the REINFORCE term.
    """

    context: Tensor
    weights: Tensor
    probs: Tensor
    index: Tensor
    log_prob: Tensor


class HardAttention(nn.Module):
    """Pick one key per query from the distribution ``softmax(score(query, key))``.

    Args:
        score: the score function that gives the distribution.
        mode: ``"sample"`` (REINFORCE; sample in training, argmax in eval) or ``"gumbel"``
            (straight-through Gumbel-softmax in training, argmax in eval).
        tau: Gumbel-softmax temperature.

    Shape:
        query ``(B, [H,] Tq, Dq)``, key ``(B, [H,] Tk, Dk)``, value ``(B, [H,] Tk, Dv)``, keep
        broadcastable to ``(B, [H,] Tq, Tk)`` with ``True`` = may attend.
    """

    def __init__(
        self, score: Score, *, mode: Literal["sample", "gumbel"] = "sample", tau: float = 1.0
    ) -> None:
        super().__init__()
        if mode not in ("sample", "gumbel"):
            raise ValueError(f"mode must be 'sample' or 'gumbel', got {mode!r}")
        if not (math.isfinite(tau) and tau > 0):
            raise ValueError(f"tau must be a positive finite number, got {tau}")
        self.score, self.mode, self.tau = score, mode, tau

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        *,
        keep: Tensor | None = None,
        generator: torch.Generator | None = None,
        prepared_key: Tensor | None = None,
    ) -> HardAttentionOutput:
        """One key per query; ``prepared_key`` is ``score.prepare(key)`` from a caller that picks
        among the same keys many times (a captioner, at every word), so it is computed once."""
        if not (query.dim() == key.dim() == value.dim()) or query.dim() not in (3, 4):
            raise ValueError(
                "query, key and value must all be (B, T, D) or all (B, H, T, D), got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        if query.size(-2) == 0 or key.size(-2) == 0 or query.size(0) == 0:
            raise ValueError(
                f"empty input: query {tuple(query.shape)}, key {tuple(key.shape)}; "
                "batch and lengths must be >= 1"
            )
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must agree")
        check_prepared(prepared_key, key)
        prepared = self.score.prepare(key) if prepared_key is None else prepared_key
        energies = self.score.energies(query, prepared)  # (B, [H,] Tq, Tk)
        if keep is not None:
            check_keep(keep, "keep")
            check_mask(keep, tuple(as_4d(energies).shape), "keep")
        probs = masked_softmax(energies, keep)  # (B, [H,] Tq, Tk), at least float32
        energies = energies.to(probs.dtype)
        has_key = probs.sum(dim=-1) > 0  # (B, [H,] Tq)
        if not self.training:
            index = probs.argmax(dim=-1)
            weights = F.one_hot(index, probs.size(-1)).to(probs.dtype)
        elif self.mode == "sample":
            flat = probs.detach().reshape(-1, probs.size(-1))
            flat = torch.where(flat.sum(-1, keepdim=True) > 0, flat, torch.ones_like(flat))
            index = torch.multinomial(flat, 1, generator=generator).view(probs.shape[:-1])
            weights = F.one_hot(index, probs.size(-1)).to(probs.dtype)
        else:
            floor = torch.finfo(energies.dtype).min
            logits = energies if keep is None else energies.masked_fill(~keep, floor)
            logits = torch.where(has_key.unsqueeze(-1), logits, 0.0)  # empty rows: any finite row
            soft = F.softmax((logits + _gumbel_noise(logits, generator)) / self.tau, dim=-1)
            index = soft.argmax(dim=-1)
            hard = F.one_hot(index, probs.size(-1)).to(soft.dtype)
            weights = hard - soft.detach() + soft  # straight-through
        weights = weights * has_key.unsqueeze(-1)
        index = index.masked_fill(~has_key, 0)
        chosen = probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)  # (B, [H,] Tq)
        log_prob = torch.where(has_key, chosen.clamp_min(torch.finfo(chosen.dtype).tiny).log(), 0.0)
        context = weights.to(value.dtype) @ value  # (B, [H,] Tq, Dv)
        return HardAttentionOutput(context, weights, probs, index, log_prob)


def _gumbel_noise(like: Tensor, generator: torch.Generator | None) -> Tensor:
    uniform = torch.rand(like.shape, generator=generator, dtype=like.dtype, device=like.device)
    tiny = torch.finfo(like.dtype).tiny
    return -torch.log((-torch.log(uniform.clamp_min(tiny))).clamp_min(tiny))

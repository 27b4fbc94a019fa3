"""Attention as a pointer: the weights themselves are the answer.

Two readers point into a passage rather than produce words:

* the Attention Sum Reader (Kadlec, Schmid, Bajgar, Kleindienst 2016, "Text Understanding with the
  Attention Sum Reader Network", eq. (3)-(4)) scores a candidate word by the attention mass on
  its occurrences in the passage, ``P(w | q, d) ∝ Σ_{i ∈ I(w, d)} s_i``:
  :func:`occurrences` finds ``I(w, d)`` and :func:`pointer_sum` sums ``s`` over it;
* a span reader (Chen, Fisch, Weston, Bordes 2017, "Reading Wikipedia to Answer Open-Domain
  Questions", sec. 3.2, DrQA) gives a start and an end distribution over the passage and answers
  with the span ``i <= j < i + max_length`` maximising ``P_s(i) P_e(j)``: :func:`best_span`.

:func:`masked_log_softmax` is the log-probability form of
:func:`qkv.attention.core.masked_softmax` (a pointer's loss is the negative log-likelihood of
the true position), finite everywhere: masked positions get the dtype's own minimum.

Masks follow the project's convention: boolean, ``True`` = a real position.
"""

from __future__ import annotations

import torch
from torch import Tensor

from qkv.attention.core import softmax_dtype

__all__ = ["best_span", "masked_log_softmax", "occurrences", "pointer_sum"]


def occurrences(passage: Tensor, passage_keep: Tensor, candidates: Tensor) -> Tensor:
    """Where each candidate word occurs in the passage, ``I(w, d)`` of Kadlec et al. eq. (3).

    Args:
        passage: ``(B, S)`` token ids.
        passage_keep: ``(B, S)`` boolean, ``True`` at real passage tokens.
        candidates: ``(B, C)`` candidate word ids (equal ids are equal words).

    Returns:
        ``(B, C, S)`` boolean: ``True`` where candidate ``c`` is the token at a kept position ``s``.
    """
    _check_ids(passage, "passage")
    _check_ids(candidates, "candidates")
    _check_keep(passage_keep, passage, "passage_keep", "passage")
    if candidates.size(0) != passage.size(0):
        raise ValueError(
            f"candidates {tuple(candidates.shape)} and passage {tuple(passage.shape)} differ "
            "in batch size"
        )
    same = candidates[:, :, None] == passage[:, None, :]  # (B, C, S)
    return same & passage_keep[:, None, :]


def pointer_sum(weights: Tensor, occurs: Tensor) -> Tensor:
    """The attention mass on each candidate's occurrences, Kadlec et al. eq. (3)-(4).

    ``P(w | q, d) ∝ Σ_{i ∈ I(w, d)} s_i``; normalising over the candidates (or not) is the
    caller's choice.

    Args:
        weights: ``(B, S)`` attention over the passage (``s_i``), any float dtype.
        occurs: ``(B, C, S)`` boolean, from :func:`occurrences`.

    Returns:
        ``(B, C)`` in ``weights``' dtype; differentiable in ``weights``.
    """
    if not weights.dtype.is_floating_point or weights.dim() != 2:
        raise ValueError(
            f"weights must be a (B, S) float tensor, got shape {tuple(weights.shape)} and dtype "
            f"{weights.dtype}"
        )
    if occurs.dtype != torch.bool or occurs.dim() != 3:
        raise ValueError(
            f"occurs must be a (B, C, S) boolean tensor, got shape {tuple(occurs.shape)} and "
            f"dtype {occurs.dtype}"
        )
    b, _, s = occurs.shape
    if weights.shape != (b, s):
        raise ValueError(
            f"weights {tuple(weights.shape)} must be (B, S) = {(b, s)} to match occurs "
            f"{tuple(occurs.shape)}"
        )
    return (occurs.to(weights.dtype) @ weights.unsqueeze(-1)).squeeze(-1)  # (B, C, 1) -> (B, C)


def masked_log_softmax(energies: Tensor, keep: Tensor) -> Tensor:
    """``log_softmax`` over the last dim, restricted to ``keep``.

    Args:
        energies: ``(..., S)`` of any float dtype; float16/bfloat16 are upcast to float32.
        keep: boolean, broadcastable to ``energies``.

    Returns:
        ``(..., S)`` (at least float32): the log-probabilities of the kept positions (their
        ``exp`` sums to 1), the dtype's minimum (finite, probability 0) at the others and on rows
        with no kept position.
    """
    if keep.dtype != torch.bool:
        raise ValueError(f"keep must be a boolean tensor (True = keep), got dtype {keep.dtype}")
    energies = energies.to(softmax_dtype(energies.dtype))
    lowest = torch.finfo(energies.dtype).min
    log_probs = energies.masked_fill(~keep, lowest).log_softmax(dim=-1)
    return log_probs.masked_fill(~keep, lowest)


def best_span(
    start_log_probs: Tensor, end_log_probs: Tensor, keep: Tensor, max_length: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The span maximising ``start_log_probs[i] + end_log_probs[j]`` (DrQA's decoding).

    Over ``i <= j < i + max_length`` with both ``i`` and ``j`` kept (Chen et al. 2017, sec. 3.2:
    "we choose the best span from token i to token i' such that i <= i' <= i + 15 and
    P_start(i) x P_end(i') is maximized"). The search runs over the band of ``max_length``
    offsets, ``(B, S, min(max_length, S))`` scores, never the whole ``(B, S, S)`` square.

    Args:
        start_log_probs: ``(B, S)``.
        end_log_probs: ``(B, S)``.
        keep: ``(B, S)`` boolean, ``True`` at positions a span may start or end on.
        max_length: the most tokens a span may cover, >= 1.

    Returns:
        ``(start (B,), end (B,), score (B,))``: inclusive positions and the summed log score.

    Raises:
        ValueError: on mismatched shapes, a ``max_length`` below 1, or a row with no kept
            position (named).
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive int, got {max_length!r}")
    if start_log_probs.dim() != 2 or start_log_probs.shape != end_log_probs.shape:
        raise ValueError(
            f"start_log_probs {tuple(start_log_probs.shape)} and end_log_probs "
            f"{tuple(end_log_probs.shape)} must both be (B, S)"
        )
    _check_keep(keep, start_log_probs, "keep", "start_log_probs")
    empty = (~keep.any(dim=-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"no kept position to point at in batch row(s) {empty}")
    b, s = start_log_probs.shape
    width = min(max_length, s)
    end = end_log_probs.to(torch.promote_types(start_log_probs.dtype, end_log_probs.dtype))
    start = start_log_probs.to(end.dtype)
    # Band k holds the span (i, i + k): pad the end scores and mask on the right by `width - 1`.
    end_padded = torch.nn.functional.pad(end, (0, width - 1))  # (B, S + width - 1)
    keep_padded = torch.nn.functional.pad(keep, (0, width - 1), value=False)
    end_band = end_padded.unfold(-1, width, 1)  # (B, S, width): [b, i, k] = end[b, i + k]
    keep_band = keep_padded.unfold(-1, width, 1) & keep[:, :, None]  # (B, S, width)
    scores = start[:, :, None] + end_band  # (B, S, width)
    scores = scores.masked_fill(~keep_band, torch.finfo(scores.dtype).min)
    best = scores.flatten(1).argmax(dim=-1)  # (B,) index into S * width
    first, offset = best // width, best % width
    rows = torch.arange(b, device=best.device)
    return first, first + offset, scores.flatten(1)[rows, best]


def _check_ids(ids: Tensor, name: str) -> None:
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must be a (B, L) integer tensor of ids, got shape {tuple(ids.shape)} and "
            f"dtype {ids.dtype}"
        )


def _check_keep(keep: Tensor, like: Tensor, name: str, like_name: str) -> None:
    if keep.dtype != torch.bool:
        raise ValueError(f"{name} must be a boolean tensor (True = keep), got dtype {keep.dtype}")
    if keep.shape != like.shape:
        raise ValueError(
            f"{name} {tuple(keep.shape)} must have the shape of {like_name} {tuple(like.shape)}"
        )

"""What greedy and beam search share: argument checks, the length constraints, one checked step.

Length convention of both searches (``tokens`` excludes BOS and the final EOS):

* ``min_len <= len(tokens)``: EOS is forbidden at steps ``0 .. min_len - 1``;
* ``len(tokens) <= max_len``: at step ``max_len`` every token but EOS is forbidden, so a
  hypothesis still running is finished with the model's own EOS log-probability (a forced EOS).
  ``max_len`` is one number, or one per sentence (``(B,)``), so that a sentence's output never
  depends on the other sentences of its batch.

A forbidden token gets log-probability ``-inf``; the others keep the model's log-probabilities
(they are not renormalised), so every score is the model's log-probability of the output.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from qkv.decoding.protocol import StepModel
from qkv.models.outputs import StepOutput


def sentence_limits(max_len: int | Tensor | list[int], batch: int, device: torch.device) -> Tensor:
    """``max_len`` as one limit per sentence: ``(B,)`` long."""
    limits = torch.as_tensor(max_len, dtype=torch.long, device=device)
    if limits.dim() == 0:
        return limits.expand(batch).clone()
    if limits.shape != (batch,):
        raise ValueError(
            f"max_len must be one number or one per sentence ({batch},), got shape "
            f"{tuple(limits.shape)}"
        )
    return limits


def check_lengths(src: Tensor, src_lengths: Tensor, *, max_len: int | Tensor, min_len: int) -> None:
    """Raise ``ValueError`` naming the offending values (``max_len``: a number or ``(B,)``)."""
    if src.dim() != 2:
        raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
    if src_lengths.shape != (src.size(0),):
        raise ValueError(
            f"src_lengths must be (B,) = ({src.size(0)},) for src of shape {tuple(src.shape)}, "
            f"got shape {tuple(src_lengths.shape)}"
        )
    limits = sentence_limits(max_len, src.size(0), src.device)
    shown = max_len if isinstance(max_len, int) else limits.tolist()
    if limits.numel() and int(limits.min()) < 0:
        raise ValueError(f"max_len must be >= 0, got max_len={shown}")
    if min_len < 0 or (limits.numel() and min_len > int(limits.min())):
        raise ValueError(
            f"min_len must be between 0 and max_len, got min_len={min_len}, max_len={shown}"
        )


def checked_step(
    model: StepModel,
    tokens: Tensor,
    state: object,
    *,
    step: int,
    min_len: int,
    max_len: Tensor,
    eos_id: int,
) -> tuple[StepOutput, Tensor]:
    """Run ``model.step`` and return its output and the constrained log-probabilities.

    ``max_len`` is ``(N,)``: the limit of each row's sentence.

    Returns:
        ``(out, log_probs)``: ``log_probs (N, V)`` in float64 (sums of many terms stay exact to
        well below the 1e-6 of the tests), with forbidden tokens at ``-inf``.
    """
    out = model.step(tokens, state)
    rows = tokens.size(0)
    log_probs = out.log_probs
    if log_probs.dim() != 2 or log_probs.size(0) != rows:
        raise ValueError(
            f"model.step returned log_probs of shape {tuple(log_probs.shape)}, "
            f"expected ({rows}, V) for {rows} input tokens"
        )
    vocab = log_probs.size(1)
    if not 0 <= eos_id < vocab:
        raise ValueError(f"eos_id={eos_id} is out of range for a vocabulary of {vocab}")
    if out.attention is not None and (out.attention.dim() != 2 or out.attention.size(0) != rows):
        raise ValueError(
            f"model.step returned attention of shape {tuple(out.attention.shape)}, "
            f"expected ({rows}, S)"
        )
    log_probs = log_probs.to(torch.float64)
    if step < min_len:
        log_probs = log_probs.index_fill(
            1, torch.tensor([eos_id], device=log_probs.device), -math.inf
        )
    at_limit = max_len <= step  # (N,)
    if bool(at_limit.any()):
        only_eos = torch.ones(vocab, dtype=torch.bool, device=log_probs.device)
        only_eos[eos_id] = False
        log_probs = log_probs.masked_fill(at_limit[:, None] & only_eos, -math.inf)  # (N, V)
    return out, log_probs


def trimmed(attention: Tensor | None, length: int) -> Tensor | None:
    """``attention (T, S)`` without the padding columns past the sentence's source length."""
    return None if attention is None else attention[:, :length].clone()


def append_attention(history: Tensor | None, attention: Tensor | None, step: int) -> Tensor | None:
    """``history (N, t, S)`` with this step's rows ``attention (N, S)`` appended."""
    if (attention is None) != (history is None) and step > 0:
        raise ValueError(
            f"model.step must return attention at every step or at none; it changed at step {step}"
        )
    if attention is None:
        return None
    rows = attention[:, None, :]  # (N, 1, S)
    return rows if history is None else torch.cat([history, rows], dim=1)

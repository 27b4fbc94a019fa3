"""What greedy and beam search share: argument checks, the encoding's positions, the length
constraints and forbidden tokens, one checked step.

Length convention of both searches (``tokens`` excludes BOS and the final EOS):

* ``min_len <= len(tokens)``: EOS is forbidden at steps ``0 .. min_len - 1``;
* ``len(tokens) <= max_len``: at step ``max_len`` every token but EOS is forbidden, so a
  hypothesis still running is finished with the model's own EOS log-probability (a forced EOS).
  ``max_len`` is one number, or one per sentence (``(B,)``), so that a sentence's output never
  depends on the other sentences of its batch.

Tokens in ``forbidden_ids`` are never generated (a captioner's ``<bos>`` and ``<pad>``, which
are never targets). With ``no_repeat_ngram = n > 0`` no output holds the same ``n``-gram twice
(Paulus et al. 2018's trigram blocking for summaries, ``n = 3``): a token that would complete an
``n``-gram already in the hypothesis is forbidden at that step. A forbidden or blocked token gets
log-probability ``-inf``; the others keep the model's log-probabilities (they are not
renormalised), so every score is the model's log-probability of the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from qkv.decoding.protocol import Encoding, StepModel
from qkv.decoding.sizes import check_int
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


def check_limits(max_len: int | Tensor | list[int], min_len: int) -> None:
    """Raise ``ValueError`` naming the offending values (``max_len``: an int or one per
    sentence; :func:`sentence_limits` checks that there is one per sentence); a length that is
    not an int (a float, a bool, a float tensor) is a ``TypeError`` naming it."""
    check_int(min_len, "min_len")
    if isinstance(max_len, Tensor):
        if max_len.dtype == torch.bool or max_len.is_floating_point() or max_len.is_complex():
            raise TypeError(f"max_len must hold ints, got a tensor of {max_len.dtype}")
    elif isinstance(max_len, list | tuple):
        for index, value in enumerate(max_len):
            check_int(value, f"max_len[{index}]")
    else:
        check_int(max_len, "max_len")
    limits = torch.as_tensor(max_len, dtype=torch.long).flatten()
    shown = max_len if isinstance(max_len, int) else limits.tolist()
    if limits.numel() and int(limits.min()) < 0:
        raise ValueError(f"max_len must be >= 0, got max_len={shown}")
    if min_len < 0 or (limits.numel() and min_len > int(limits.min())):
        raise ValueError(
            f"min_len must be between 0 and max_len, got min_len={min_len}, max_len={shown}"
        )


def check_forbidden(forbidden_ids: Sequence[int], eos_id: int) -> tuple[int, ...]:
    """The forbidden token ids as a tuple; EOS may not be one of them (nothing could end)."""
    forbidden = tuple(int(i) for i in forbidden_ids)
    if eos_id in forbidden:
        raise ValueError(f"eos_id={eos_id} cannot be forbidden, got forbidden_ids={forbidden}")
    return forbidden


def check_no_repeat(no_repeat_ngram: int) -> int:
    """``no_repeat_ngram`` as an int ``>= 0`` (0: no blocking)."""
    if isinstance(no_repeat_ngram, bool) or not isinstance(no_repeat_ngram, int):
        raise ValueError(f"no_repeat_ngram must be an int >= 0, got {no_repeat_ngram!r}")
    if no_repeat_ngram < 0:
        raise ValueError(f"no_repeat_ngram must be >= 0 (0 blocks nothing), got {no_repeat_ngram}")
    return no_repeat_ngram


def repeated_ngram_tokens(history: Tensor, n: int, vocab: int) -> Tensor:
    """``(N, V)`` bool: ``True`` where a token would complete an ``n``-gram that row ``i`` of
    ``history (N, t)`` already holds (its last ``n - 1`` tokens followed by that token)."""
    rows, length = history.shape
    blocked = torch.zeros(rows, vocab, dtype=torch.bool, device=history.device)
    if n < 1 or length < n:
        return blocked
    grams = history.unfold(1, n, 1)  # (N, t - n + 1, n): every n-gram so far
    prefix = history[:, length - n + 1 :]  # (N, n - 1): the last n - 1 tokens
    same = (grams[:, :, : n - 1] == prefix[:, None, :]).all(dim=-1)  # (N, t - n + 1)
    counts = torch.zeros(rows, vocab, dtype=torch.long, device=history.device)
    counts.scatter_add_(1, grams[:, :, -1], same.long())  # the token that ended each match
    return counts > 0


def positions(encoded: Encoding) -> Tensor:
    """``encoded.keep`` as ``(B, S)``: ``True`` at the real positions of each sentence."""
    keep = getattr(encoded, "keep", None)
    if not isinstance(keep, Tensor) or keep.dtype != torch.bool or keep.dim() < 2:
        shown = (
            f"{keep.dtype} of shape {tuple(keep.shape)}"
            if isinstance(keep, Tensor)
            else type(keep).__name__
        )
        raise ValueError(
            "model.encode must return a value whose keep is a bool tensor (B, .., S) of the "
            f"positions its attention covers, got {shown}"
        )
    if any(size != 1 for size in keep.shape[1:-1]):
        raise ValueError(
            f"the encoding's keep must be (B, 1, .., 1, S), got shape {tuple(keep.shape)}"
        )
    return keep.reshape(keep.size(0), keep.size(-1))


def checked_step(
    model: StepModel,
    tokens: Tensor,
    state: object,
    *,
    step: int,
    min_len: int,
    max_len: Tensor,
    eos_id: int,
    forbidden: tuple[int, ...] = (),
    history: Tensor | None = None,
    no_repeat_ngram: int = 0,
) -> tuple[StepOutput, Tensor]:
    """Run ``model.step`` and return its output and the constrained log-probabilities.

    ``max_len`` is ``(N,)``: the limit of each row's sentence; ``forbidden``: token ids never
    generated; ``history (N, t)``: each row's tokens so far, which ``no_repeat_ngram > 0``
    reads to block repeated n-grams.

    Returns:
        ``(out, log_probs)``: ``log_probs (N, V)`` in the model's dtype, with forbidden tokens
        at ``-inf``. The searches add the values they pick in float64 (sums of many terms stay
        exact to well below the 1e-6 of the tests); widening is exact and keeps every order, so
        picking before widening picks the same values.
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
    if forbidden and not 0 <= min(forbidden) <= max(forbidden) < vocab:
        raise ValueError(
            f"forbidden_ids={list(forbidden)} are out of range for a vocabulary of {vocab}"
        )
    if forbidden:
        index = torch.tensor(forbidden, device=log_probs.device)
        log_probs = log_probs.index_fill(1, index, -math.inf)
    if step < min_len:
        log_probs = log_probs.index_fill(
            1, torch.tensor([eos_id], device=log_probs.device), -math.inf
        )
    if no_repeat_ngram and history is not None:
        blocked = repeated_ngram_tokens(history, no_repeat_ngram, vocab)  # (N, V)
        blocked[:, eos_id] = False  # EOS never repeats an n-gram: it ends the output
        log_probs = log_probs.masked_fill(blocked, -math.inf)
    at_limit = max_len <= step  # (N,)
    if bool(at_limit.any()):
        only_eos = torch.ones(vocab, dtype=torch.bool, device=log_probs.device)
        only_eos[eos_id] = False
        log_probs = log_probs.masked_fill(at_limit[:, None] & only_eos, -math.inf)  # (N, V)
    return out, log_probs


def trimmed(attention: Tensor | None, keep: Tensor) -> Tensor | None:
    """``attention (T, S)`` at the real positions ``keep (S,)`` only (a copy)."""
    if attention is None:
        return None
    if attention.size(-1) != keep.size(0):
        raise ValueError(
            f"model.step returned attention over {attention.size(-1)} positions, but the "
            f"encoding's keep covers {keep.size(0)}"
        )
    return attention[:, keep]


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

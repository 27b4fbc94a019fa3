"""Greedy captions of a :class:`~qkv.models.show_attend_tell.model.ShowAttendTell`, two ways, laid
out
as :class:`Captions`: the step loop that ``ShowAttendTell.generate`` ran before the captioner was
decoded by :mod:`qkv.decoding` (:func:`reference_captions`, kept here as the reference), and
:func:`qkv.decoding.greedy_search` (:func:`greedy_captions`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from qkv.decoding import greedy_search
from qkv.models.show_attend_tell.model import ShowAttendTell


@dataclass(frozen=True)
class Captions:
    """``ids (B, L)`` (words, ``<eos>``, then ``<pad>``), ``lengths (B,)`` words before
    ``<eos>``, ``attention (B, L, R)`` the map of every step (zero after the end)."""

    ids: Tensor
    lengths: Tensor
    attention: Tensor


@torch.no_grad()
def reference_captions(
    model: ShowAttendTell,
    images: Tensor,
    keep: Tensor | None,
    *,
    max_len: int,
    bos: int,
    eos: int,
    pad: int = 0,
) -> Captions:
    """``ShowAttendTell.generate`` as it was: greedy over the words that are not ``bos`` or
    ``pad``, ties to the lowest id, ``<eos>`` forced at step ``max_len``; every row is stepped
    until all have ended."""
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    state = model.init_state(model.encode(images, keep))
    b, device = images.size(0), images.device
    tokens = torch.full((b,), bos, dtype=torch.long, device=device)
    running = torch.ones(b, dtype=torch.bool, device=device)
    lengths = torch.full((b,), max_len, dtype=torch.long, device=device)
    allowed = torch.ones(model.config.vocab_size, dtype=torch.bool, device=device)
    allowed[[bos, pad]] = False  # never targets, so never words
    candidates = allowed.nonzero().flatten()  # (V',)
    ids, maps = [], []
    for t in range(max_len + 1):
        out = model.step(tokens, state)
        if t == max_len:  # the length limit: only <eos> is left
            tokens = torch.full_like(tokens, eos)
        else:  # the most likely candidate; ties go to the lowest id
            tokens = candidates[out.log_probs[:, candidates].argmax(-1)]  # (B,)
        finished = running & (tokens == eos)
        lengths = torch.where(finished, t, lengths)
        ids.append(torch.where(running, tokens, pad))
        maps.append(out.attention * running[:, None])  # (B, R)
        running = running & ~finished
        state = out.state
        if not bool(running.any()):
            break
    return Captions(torch.stack(ids, 1), lengths, torch.stack(maps, 1))


def greedy_captions(
    model: ShowAttendTell,
    images: Tensor,
    keep: Tensor | None,
    *,
    max_len: int,
    bos: int,
    eos: int,
    pad: int = 0,
) -> Captions:
    """:func:`qkv.decoding.greedy_search` with ``bos`` and ``pad`` forbidden, laid out as
    :func:`reference_captions` lays its captions out (attention over every region ``R``: the
    padded tiles' columns, dropped from a hypothesis, are zero here)."""
    hypotheses = greedy_search(
        model, images, keep, max_len=max_len, bos_id=bos, eos_id=eos, forbidden_ids=(bos, pad)
    )
    encoded = model.encode(images, keep)
    real = encoded.keep[:, 0]  # (B, R)
    steps = max(len(h.tokens) + 1 for h in hypotheses)
    ids = torch.full((len(hypotheses), steps), pad, dtype=torch.long)
    attention = torch.zeros(len(hypotheses), steps, real.size(1))
    for row, h in enumerate(hypotheses):
        ids[row, : len(h.tokens) + 1] = torch.tensor([*h.tokens, eos])
        attention[row, : len(h.tokens) + 1, real[row]] = h.attention
    lengths = torch.tensor([len(h.tokens) for h in hypotheses])
    return Captions(ids, lengths, attention)

"""A bidirectional RNN over right-padded sequences, packed so that padding changes nothing.

What the readers of :mod:`qkv.models.cloze_reader` and :mod:`qkv.models.span_reader` share:
their embeddings are shared between passage, question and candidates, so they cannot use
:class:`qkv.layers.recurrent.RecurrentEncoder` (which owns its embedding); they hand already
embedded inputs to :func:`run_packed`. Packing (``pack_padded_sequence``) starts the backward
direction at each sequence's own last token, so an example's states do not depend on its padding
or on its batch mates, and padded positions of the states are exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from qkv.layers.recurrent import run_rnn

__all__ = ["PackedRun", "check_prefix_keep", "run_packed"]


@dataclass(frozen=True)
class PackedRun:
    """What :func:`run_packed` returns.

    Attributes:
        states: ``(B, T, 2H)`` top-layer states ``[h->_t; h<-_t]``; zero at padded positions.
        final: ``(B, 2H)`` ``[h->_last; h<-_first]`` of the top layer: the states that have read
            the whole sequence (Hermann et al. 2015's ``u = y->(|q|) || y<-(1)``).
    """

    states: Tensor
    final: Tensor


def check_prefix_keep(keep: Tensor, ids: Tensor, name: str) -> Tensor:
    """Check that ``keep`` is a right-padding mask of ``ids``' shape with at least one real
    token per row; return the lengths ``(B,)``.

    Raises:
        ValueError: naming ``name``, the shapes, or the offending rows.
    """
    if keep.dtype != torch.bool or keep.shape != ids.shape or keep.dim() != 2:
        raise ValueError(
            f"{name}_keep must be a boolean (B, L) tensor of {name}'s shape {tuple(ids.shape)}, "
            f"got shape {tuple(keep.shape)} and dtype {keep.dtype}"
        )
    lengths = keep.sum(dim=-1)  # (B,)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{name} has no real token in batch row(s) {empty}")
    prefix = torch.arange(keep.size(1), device=keep.device)[None, :] < lengths[:, None]
    holes = (prefix != keep).any(dim=-1).nonzero().flatten().tolist()
    if holes:
        raise ValueError(
            f"{name}_keep must mark real tokens first, then padding; batch row(s) {holes} "
            "have padding between real tokens"
        )
    return lengths


def run_packed(rnn: nn.RNNBase, inputs: Tensor, lengths: Tensor) -> PackedRun:
    """Run the bidirectional, batch-first ``rnn`` over ``inputs (B, T, E)`` of ``lengths (B,)``.

    Returns:
        :class:`PackedRun` with ``states (B, T, 2H)`` and ``final (B, 2H)``.
    """
    t = inputs.size(1)
    packed = pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, last = run_rnn(rnn, packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=t)  # (B, T, 2H)
    last = last[0] if isinstance(last, tuple) else last  # an LSTM's (h_n, c_n): h_n
    # h_n is (layers * 2, B, H), ordered (layer, direction): the top layer's two directions.
    final = torch.cat([last[-2], last[-1]], dim=-1)  # (B, 2H)
    return PackedRun(states.to(inputs.dtype), final.to(inputs.dtype))

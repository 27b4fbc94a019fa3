"""Recurrent encoder and decoders of the attention-based RNN translation models.

* :class:`RecurrentEncoder`: embedding and a bidirectional GRU/LSTM whose forward and backward
  states are concatenated, ``h_j = [h->_j; h<-_j]`` (Bahdanau et al. 2015, section 3.2).
* :class:`.FixedContextDecoder`: Cho et al. 2014, "Learning Phrase Representations using RNN
  Encoder-Decoder", section 2.2: one context ``c`` for the whole sentence, fed at every step,
  ``s_t = f(s_{t-1}, y_{t-1}, c)`` and ``p(y_t) = g(s_t, y_{t-1}, c)``. The bottleneck baseline.
* :class:`.BahdanauDecoder`: Bahdanau, Cho, Bengio 2015, "Neural Machine Translation by Jointly
  Learning to Align and Translate", eq. (4)-(6) and (A.1.2): the previous state scores every
  source state, ``e_tj = v^T tanh(W s_{t-1} + U h_j)``, ``c_t = sum_j a_tj h_j``,
  ``s_t = f(s_{t-1}, y_{t-1}, c_t)``, ``p(y_t) = g(y_{t-1}, s_t, c_t)``.
* :class:`.LuongDecoder`: Luong, Pham, Manning 2015, "Effective Approaches to Attention-based
  Neural Machine Translation", eq. (5), (7), (8) and section 3.3: the current state scores the
  source, ``h~_t = tanh(W_c [c_t; h_t])``, and ``h~_{t-1}`` is fed to the next input (input
  feeding).

Each decoder returns *features* ``(B, T, D_out)``; the model maps them to the vocabulary. The
``g`` of Cho and Bahdanau is a maxout layer (both papers, appendix A); Luong's is ``h~_t``.
All attention goes through :func:`qkv.attention.core.attend`. This module holds the encoder,
the decoders' shared state and step (:class:`RecurrentDecoder`); the three decoders are in
:mod:`qkv.layers.recurrent_decoders`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import cast

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from qkv.attention.core import attend
from qkv.attention.masks import padding_mask
from qkv.attention.scores import Score
from qkv.hardware import cpu_has_bfloat16

__all__ = [
    "RNN_CELLS",
    "EncoderOutput",
    "Maxout",
    "RecurrentDecoder",
    "RecurrentEncoder",
    "RecurrentState",
]

RNN_CELLS: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


def _rnn(
    cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float, **kw: bool
) -> nn.RNNBase:
    if cell not in RNN_CELLS:
        raise ValueError(f"cell must be one of {tuple(RNN_CELLS)}, got {cell!r}")
    # nn.GRU/LSTM warn about dropout with one layer: it only acts between layers.
    dropout = dropout if num_layers > 1 else 0.0
    return RNN_CELLS[cell](
        input_size, hidden_size, num_layers, batch_first=True, dropout=dropout, **kw
    )


def _lstm_needs_float32(rnn: nn.Module, device: torch.device) -> bool:
    """Under CPU bfloat16 autocast, ``nn.LSTM`` runs oneDNN's bfloat16 LSTM, which exists only
    on CPUs with bfloat16 support (AVX-512 BF16, AMX); elsewhere (an AVX2 CPU) it fails with
    "could not create a primitive descriptor". There the LSTM runs in float32."""
    return (
        isinstance(rnn, nn.LSTM)
        and device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and not cpu_has_bfloat16()
    )


def run_rnn(rnn: nn.Module, x: Tensor | PackedSequence, state: object = None):
    """``rnn(x, state)``, in float32 where this CPU has no bfloat16 LSTM (see above)."""
    device = (x.data if isinstance(x, PackedSequence) else x).device
    if not _lstm_needs_float32(rnn, device):
        return rnn(x, state)
    with torch.autocast("cpu", enabled=False):
        if isinstance(state, tuple):
            state = tuple(s.float() for s in state)
        return rnn(x.float(), state)


@dataclass(frozen=True)
class EncoderOutput:
    """What :class:`RecurrentEncoder` returns.

    Attributes:
        memory: ``(B, S, 2He)`` top-layer states ``[h->_j; h<-_j]``; zero at padded positions.
        keep: ``(B, 1, S)`` boolean padding keep-mask (``True`` = real source token).
        final: ``(B, L, 2He)`` per layer, ``[h->_last; h<-_first]`` (the states that read the whole
            sentence); ``final[:, -1]`` is ``[memory[b, len-1, :He]; memory[b, 0, He:]]``.
        final_cell: ``(B, L, 2He)`` the same for the LSTM cell states; ``None`` for a GRU.
    """

    memory: Tensor
    keep: Tensor
    final: Tensor
    final_cell: Tensor | None = None


class RecurrentEncoder(nn.Module):
    """Embedding, dropout and a bidirectional GRU/LSTM over packed (unpadded) sequences.

    Packing makes every state independent of the padding: the backward RNN starts at each
    sentence's own last token, and padded positions of ``memory`` are exactly zero.

    Args:
        vocab_size: source vocabulary ``V``.
        embed_dim: embedding width ``E``.
        hidden_dim: RNN width ``He`` per direction.
        num_layers: stacked bidirectional layers ``L``.
        cell: ``"gru"`` or ``"lstm"``.
        dropout: on the embeddings and between layers (training only).
        pad_id: padding token id (its embedding is zero and gets no gradient).

    Shape:
        src ``(B, S)`` long, lengths ``(B,)`` in ``[1, S]``; see :class:`EncoderOutput`.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        *,
        num_layers: int = 1,
        cell: str = "gru",
        dropout: float = 0.0,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.rnn = _rnn(cell, embed_dim, hidden_dim, num_layers, dropout, bidirectional=True)
        self.num_layers, self.hidden_dim = num_layers, hidden_dim
        self.output_dim = 2 * hidden_dim

    def forward(self, src: Tensor, lengths: Tensor) -> EncoderOutput:
        b, s = src.shape
        emb = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, hn = run_rnn(self.rnn, packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=s)  # (B, S, 2He)
        hn, cn = hn if isinstance(hn, tuple) else (hn, None)
        keep = padding_mask(lengths.to(src.device), s)[:, 0]  # (B, 1, 1, S) -> (B, 1, S)
        final_cell = None if cn is None else self._final(cn, b)
        return EncoderOutput(memory, keep, self._final(hn, b), final_cell)

    def _final(self, states: Tensor, b: int) -> Tensor:
        # PyTorch orders h_n as (layer, direction): (2L, B, He) -> (L, 2, B, He).
        states = states.view(self.num_layers, 2, b, self.hidden_dim)
        return torch.cat([states[:, 0], states[:, 1]], dim=-1).transpose(0, 1)  # (B, L, 2He)


@dataclass(frozen=True)
class RecurrentState:
    """Decoder state between steps: tensors only, batch first, ``None`` where unused.

    Attributes:
        hidden: ``(B, L, Ds)`` decoder state per layer (``s_{t-1}``).
        cell: ``(B, L, Ds)`` LSTM cell state; ``None`` for a GRU.
        memory: ``(B, S, 2He)`` encoder states, the attention's values.
        keys: ``(B, S, *)`` ``score.prepare(memory)`` (Bahdanau's ``U h``), once per sentence and
            passed to :func:`attend` as ``prepared_key`` at every step.
        keep: ``(B, 1, S)`` padding keep-mask.
        context: ``(B, 2He)`` Cho et al.'s fixed context ``c``.
        feed: ``(B, Ds)`` Luong's ``h~_{t-1}`` (input feeding).
        coverage: ``(B, S)`` the attention summed over past steps (See et al. 2017, eq. 10),
            for a decoder whose score reads it; ``None`` otherwise.
    """

    hidden: Tensor
    cell: Tensor | None = None
    memory: Tensor | None = None
    keys: Tensor | None = None
    keep: Tensor | None = None
    context: Tensor | None = None
    feed: Tensor | None = None
    coverage: Tensor | None = None

    def index_select(self, index: Tensor) -> RecurrentState:
        """Rows ``index (B',)`` of every tensor (reorder, drop or repeat hypotheses)."""
        rows = {
            f.name: None if (t := getattr(self, f.name)) is None else t.index_select(0, index)
            for f in fields(self)
            if f.name != "hidden"
        }
        return RecurrentState(self.hidden.index_select(0, index), **rows)


class Maxout(nn.Module):
    """Maxout layer (Goodfellow et al. 2013), as in Bahdanau et al. 2015 appendix A.2.2 and Cho
    et al. 2014 appendix A: ``t_i = max_k (W x)_{i, k}`` over ``pool`` linear pieces."""

    def __init__(self, in_features: int, out_features: int, pool: int = 2) -> None:
        super().__init__()
        self.pool = pool
        self.linear = nn.Linear(in_features, out_features * pool)

    def forward(self, x: Tensor) -> Tensor:
        pieces = self.linear(x)  # (..., out * pool)
        pieces = pieces.unflatten(-1, (-1, self.pool))  # (..., out, pool)
        return pieces.max(dim=-1).values  # (..., out)


class RecurrentDecoder(nn.Module):
    """Shared part of the three decoders: the unidirectional RNN and the bridge.

    The initial state is ``s_0 = tanh(W_init [h->_last; h<-_first])`` per layer (Bahdanau et al.
    2015 A.2.2 uses ``tanh(W_s h<-_1)``; Cho et al. 2014 ``tanh(V' c)``); an LSTM cell starts at
    ``W_cell`` of the encoder's final cells.

    Subclasses implement :meth:`step`; :meth:`forward` runs it over a teacher-forced sequence.
    Attention decoders set :attr:`score`: :meth:`init_state` then prepares the keys once per
    sentence and ``_attend`` scores them from a query at each step.

    Args:
        cell: ``"gru"`` or ``"lstm"``.
        input_dim: width of the RNN input at each step.
        memory_dim: width ``2He`` of the encoder states.
        hidden_dim: decoder state width ``Ds``.
        num_layers: stacked layers ``L`` (as in the encoder, whose final states seed them).
        dropout: between layers, training only.
    """

    def __init__(
        self,
        cell: str,
        input_dim: int,
        memory_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.rnn = _rnn(cell, input_dim, hidden_dim, num_layers, dropout)
        self.bridge = nn.Linear(memory_dim, hidden_dim)
        self.bridge_cell = nn.Linear(memory_dim, hidden_dim) if cell == "lstm" else None
        self.hidden_dim = hidden_dim
        self.output_dim = hidden_dim
        self.score: Score | None = None

    def init_state(self, encoded: EncoderOutput) -> RecurrentState:
        if encoded.final.size(1) != self.rnn.num_layers:
            raise ValueError(
                f"the encoder has {encoded.final.size(1)} layers and the decoder "
                f"{self.rnn.num_layers}; each decoder layer starts from one encoder layer"
            )
        hidden = torch.tanh(self.bridge(encoded.final))  # (B, L, Ds)
        cell = None
        if self.bridge_cell is not None:
            if encoded.final_cell is None:
                raise ValueError("an LSTM decoder needs an LSTM encoder (final_cell is None)")
            cell = self.bridge_cell(encoded.final_cell)  # (B, L, Ds)
        if self.score is None:
            return RecurrentState(hidden=hidden, cell=cell)
        return RecurrentState(
            hidden=hidden,
            cell=cell,
            memory=encoded.memory,
            keys=self.score.prepare(encoded.memory),  # (B, S, *), e.g. Bahdanau's U h
            keep=encoded.keep,
        )

    def _attend(
        self, query: Tensor, state: RecurrentState, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Score ``query (B, 1, Ds)`` against the prepared keys: context ``(B, 2He)`` and
        weights ``(B, S)`` (``None`` unless ``need_weights``)."""
        assert state.memory is not None  # init_state sets it when the decoder attends
        att = attend(
            query,
            state.memory,
            state.memory,
            score=self.score,
            keep=state.keep,
            training=self.training,
            need_weights=need_weights,
            prepared_key=state.keys,
        )
        weights = None if att.weights is None else att.weights.squeeze(1)  # (B, S)
        return att.context.squeeze(1), weights  # (B, 1, 2He) -> (B, 2He)

    def step(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = True
    ) -> tuple[Tensor, RecurrentState, Tensor | None]:
        """One step from the embedding of ``y_{t-1}`` ``(B, E)``.

        Returns:
            features ``(B, D_out)``, the next state, and the ``(B, S)`` attention weights (``None``
            without attention or unless ``need_weights``).
        """
        raise NotImplementedError

    def forward(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced decoding of embeddings ``(B, T, E)``.

        Returns:
            features ``(B, T, D_out)`` and weights ``(B, T, S)`` (or ``None``).
        """
        features, weights = [], []
        for t in range(emb.size(1)):
            out, state, w = self.step(emb[:, t], state, need_weights=need_weights)
            features.append(out)
            weights.append(w)
        stacked = torch.stack(features, dim=1)  # (B, T, D_out)
        if not need_weights or weights[0] is None:
            return stacked, None
        # Attending decoders return weights at every step when asked for them.
        return stacked, torch.stack(cast("list[Tensor]", weights), dim=1)  # (B, T, S)

    def _run_rnn(self, x: Tensor, state: RecurrentState) -> tuple[Tensor, RecurrentState]:
        """RNN over ``x (B, T, I)`` from ``state``; returns outputs ``(B, T, Ds)``, new state."""
        h0 = state.hidden.transpose(0, 1).contiguous()  # (B, L, Ds) -> (L, B, Ds)
        if state.cell is None:
            out, hn = run_rnn(self.rnn, x, h0)
            return out, replace(state, hidden=hn.transpose(0, 1))  # (B, L, Ds)
        c0 = state.cell.transpose(0, 1).contiguous()  # (L, B, Ds)
        out, (hn, cn) = run_rnn(self.rnn, x, (h0, c0))
        return out, replace(state, hidden=hn.transpose(0, 1), cell=cn.transpose(0, 1))

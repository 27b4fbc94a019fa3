"""The decode step of the RNN translation models (:class:`~qkv.models.seq2seq_rnn.Seq2SeqRNN`:
no attention, Bahdanau, Luong), lean enough for serving on a CPU, as
:mod:`qkv.models.transformer.decode` is for the Transformer.

The module path (``Seq2SeqRNN.step`` under greedy or beam search) pays per step for generality:
``nn.GRU``/``nn.LSTM`` called on a length-1 sequence (with its transposes and copies of the
state), the score module, :func:`~qkv.attention.core.attend`'s checks, the readout module, and at
every reordering of the hypotheses a copy of the whole state, the encoder's memory and the
prepared keys included. :class:`LeanRNNDecoder` computes the same function with

- the cell's gates as plain products and elementwise updates with public torch ops: an LSTM's
  four gates as one product of ``[x; h]`` with the concatenated ``[W_ih | W_hh]`` plus the
  summed biases; a GRU's as two, ``W_ih x + b_ih`` and ``W_hh h + b_hh``, since its reset gate
  multiplies the hidden part of the candidate alone (``n = tanh(W_in x + b_in + r * (W_hn h +
  b_hn))``): one product would need a zero block, a third more work, measured slower;
- the attention keys prepared once per sentence (Bahdanau's ``U h_j``, Luong's general
  ``W h_s``, concat's ``W_a h_s``; dot's are the memory itself) and never copied while the
  sentence decodes: the ``K`` hypotheses of a sentence attend to its source as ``K`` queries of
  one batched product, ``(G, K, Ds) x (G, S, Ds)`` for ``G`` sentences;
- the rows' own state (hidden and cell states per layer, Luong's ``h~_{t-1}``) selected with one
  ``index_select`` each when the beam reorders, and not at all when no row moves (greedy search
  until a sentence ends).

It answers the step protocol (:mod:`qkv.decoding.protocol`), so greedy and beam search run it
unchanged; float32 only. ``tests/models/test_rnn_decode.py`` checks that translations through
it equal the module path's token for token, and its log-probabilities to 1e-5.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.attention.core import masked_softmax
from qkv.attention.scores import Additive, Dot, General
from qkv.layers.packed_linear import packed_for
from qkv.layers.recurrent import EncoderOutput, Maxout
from qkv.layers.recurrent_decoders import BahdanauDecoder, FixedContextDecoder, LuongDecoder
from qkv.models.outputs import StepOutput
from qkv.models.sentence_groups import select_sentences
from qkv.models.seq2seq_rnn import Seq2SeqRNN

__all__ = ["LeanRNNDecoder", "LeanRNNState", "RNNDecodeWeights", "decode_weights", "has_lean_step"]


@dataclass(frozen=True)
class _Cell:
    """One layer's gates: an LSTM's ``[x; h] @ weight^T + bias``; a GRU's ``x @ weight^T + bias``
    and ``h @ hidden_weight^T + hidden_bias``."""

    weight: Tensor  # LSTM (4 Ds, I + Ds); GRU (3 Ds, I)
    bias: Tensor  # (4 Ds,) summed; GRU (3 Ds,) b_ih
    hidden_weight: Tensor | None = None  # GRU (3 Ds, Ds)
    hidden_bias: Tensor | None = None  # GRU (3 Ds,) b_hh


def _fused_cell(rnn: nn.RNNBase, layer: int) -> _Cell:
    """Layer ``layer`` of ``rnn``: an LSTM's gates ``[i, f, g, o]`` as one product; a GRU's
    ``[r, z, n]`` as two, of the input and of the hidden state."""
    w_ih = getattr(rnn, f"weight_ih_l{layer}").detach()  # (G Ds, I)
    w_hh = getattr(rnn, f"weight_hh_l{layer}").detach()  # (G Ds, Ds)
    b_ih = getattr(rnn, f"bias_ih_l{layer}", None)
    b_hh = getattr(rnn, f"bias_hh_l{layer}", None)
    b_ih = w_ih.new_zeros(w_ih.size(0)) if b_ih is None else b_ih.detach()
    b_hh = w_hh.new_zeros(w_hh.size(0)) if b_hh is None else b_hh.detach()
    if isinstance(rnn, nn.LSTM):
        return _Cell(torch.cat([w_ih, w_hh], dim=1).contiguous(), b_ih + b_hh)  # (4 Ds, I + Ds)
    # A GRU's reset gate multiplies the hidden part of its candidate alone: the two products
    # stay apart, [W_ir W_iz W_in] x + b_ih and [W_hr W_hz W_hn] h + b_hh (ATen's order).
    return _Cell(w_ih.contiguous(), b_ih, w_hh.contiguous(), b_hh)


def _linear(module: nn.Linear | Maxout) -> tuple[Tensor, Tensor | None]:
    linear = module.linear if isinstance(module, Maxout) else module
    return linear.weight.detach(), None if linear.bias is None else linear.bias.detach()


# What a step's feature function returns: features (R, Ds), each layer's h (and c), the next
# feed (Luong) and the attention weights (G, K, S), or None for those a decoder has not.
_Features = tuple[
    Tensor, tuple[Tensor, ...], tuple[Tensor, ...] | None, Tensor | None, Tensor | None
]


class RNNDecodeWeights:
    """Fused copies of a :class:`Seq2SeqRNN` decoder's weights (float32, the model's device)."""

    def __init__(self, model: Seq2SeqRNN) -> None:
        if not isinstance(model, Seq2SeqRNN):
            raise TypeError(
                f"the lean RNN decode step takes a Seq2SeqRNN, got {type(model).__name__}"
            )
        if model.copy_head is not None:
            raise ValueError(
                "the lean decode step has no copy head; decode a copying (pointer-generator) "
                "Seq2SeqRNN through its module path"
            )
        decoder = model.decoder
        self.lstm = isinstance(decoder.rnn, nn.LSTM)
        self.cells = [_fused_cell(decoder.rnn, i) for i in range(decoder.rnn.num_layers)]
        self.embedding = model.tgt_embed.weight.detach()  # (V, E)
        self.generator = _linear(model.generator)  # Ds -> V
        self.readout: tuple[Tensor, Tensor | None] | None = None  # maxout, Ds + 2He + E -> 2 Ds
        self.combine: Tensor | None = None  # Luong's W_c, 2He + Ds -> Ds
        if isinstance(decoder, (FixedContextDecoder, BahdanauDecoder)):
            self.readout, self.pool = _linear(decoder.readout), decoder.readout.pool
        if isinstance(decoder, LuongDecoder):
            self.combine = decoder.combine.weight.detach()
        if not isinstance(decoder, (FixedContextDecoder, BahdanauDecoder, LuongDecoder)):
            raise TypeError(f"no lean decode step for a {type(decoder).__name__}")
        self.score = decoder.score
        if self.score is not None and not isinstance(self.score, (Additive, Dot, General)):
            raise TypeError(
                f"the lean RNN decode step knows the Additive, Dot and General scores, not "
                f"{type(self.score).__name__}; decode this model through its module path"
            )


@dataclass(frozen=True)
class LeanRNNState:
    """The decoder state of :class:`LeanRNNDecoder` for ``R = G * K`` rows: ``G`` source
    sentences with ``K`` rows (hypotheses) each, in sentence order.

    Attributes:
        hidden: per layer, ``(R, Ds)`` the decoder state ``s_{t-1}``.
        cell: per layer, ``(R, Ds)`` the LSTM cell state; ``None`` for a GRU.
        feed: ``(R, Ds)`` Luong's ``h~_{t-1}`` (input feeding); ``None`` for the others.
        keep: ``(G, 1, S)`` the source keep-mask, one row per sentence.
        memory: ``(G, S, 2He)`` the encoder states (the attention's values); ``None`` without
            attention.
        keys: ``(G, S, *)`` the prepared keys (``U h_j``, ``W h_s`` or the memory itself).
        context: ``(G, 2He)`` Cho et al.'s fixed context; ``None`` for the attending decoders.
        group: ``K``, rows per sentence.
        need_attention: whether :meth:`LeanRNNDecoder.step` reports attention.
    """

    hidden: tuple[Tensor, ...]
    cell: tuple[Tensor, ...] | None
    feed: Tensor | None
    keep: Tensor
    memory: Tensor | None
    keys: Tensor | None
    context: Tensor | None
    group: int
    need_attention: bool


class LeanRNNDecoder:
    """A :class:`Seq2SeqRNN` translation model as a step model with the lean decode step.

    Args:
        model: the model (no copy head), in eval mode (no dropout is applied).
        need_attention: report each step's attention ``(R, S)``, as :meth:`Seq2SeqRNN.step`
            does; ``False`` gives ``None`` (the searches then keep no attention history).
        weights: the fused weights (:func:`decode_weights`), made here when not given.
    """

    def __init__(
        self,
        model: Seq2SeqRNN,
        *,
        need_attention: bool = False,
        weights: RNNDecodeWeights | None = None,
    ) -> None:
        self.model = model
        self.weights = weights or RNNDecodeWeights(model)
        self.need_attention = need_attention
        # How a step turns the input into features, from the weights the decoder has: W_c
        # (Luong: update, then attend, input feeding) or a maxout readout (Bahdanau, or the
        # fixed context when there is no score).
        self._features = self._fed_features if self.weights.combine is not None else self._read

    def encode(self, src: Tensor, src_lengths: Tensor) -> EncoderOutput:
        """The module's encoder, once per batch."""
        encoded = self.model.encode(src, src_lengths)
        assert isinstance(encoded, EncoderOutput)  # no copy head
        return encoded

    def init_state(self, encoded: EncoderOutput) -> LeanRNNState:
        """The module's initial state (the bridged final states), with the keys prepared in the
        form the step scores them."""
        w = self.weights
        start = self.model.decoder.init_state(encoded)
        hidden = tuple(start.hidden[:, i].contiguous() for i in range(len(w.cells)))  # (B, Ds)
        cell = None
        if start.cell is not None:
            cell = tuple(start.cell[:, i].contiguous() for i in range(len(w.cells)))
        keys = start.keys
        if isinstance(w.score, General):  # q^T W h = q . (W h): W h once per sentence
            keys = F.linear(encoded.memory, w.score.weight.detach())  # (B, S, Ds)
        return LeanRNNState(
            hidden, cell, start.feed, encoded.keep, start.memory, keys, start.context, 1,
            self.need_attention,
        )  # fmt: skip

    def step(self, tokens: Tensor, state: LeanRNNState) -> StepOutput:
        """Feed ``tokens (R,)``; log-probabilities ``(R, V)`` of the next token."""
        w = self.weights
        rows = state.hidden[0].size(0)
        if tokens.shape != (rows,):
            raise ValueError(f"tokens must be (R={rows},), got shape {tuple(tokens.shape)}")
        emb = w.embedding[tokens]  # (R, E)
        features, hidden, cell, feed, weights = self._features(emb, state)
        logits = F.linear(features, *w.generator)  # (R, V)
        attention = (
            weights.reshape(rows, -1) if state.need_attention and weights is not None else None
        )
        new = replace(state, hidden=hidden, cell=cell, feed=feed)
        return StepOutput(logits.log_softmax(dim=-1), new, attention)

    def _fed_features(self, emb: Tensor, state: LeanRNNState) -> _Features:
        """Luong: ``h_t`` from ``[E y; h~_{t-1}]``, then ``h_t`` scores the source and
        ``h~_t = tanh(W_c [c_t; h_t])`` is both the features and the next step's feed."""
        w = self.weights
        assert state.feed is not None and w.combine is not None  # a Luong decoder's
        hidden, cell = self._cells(torch.cat([emb, state.feed], dim=1), state)
        context, weights = self._attend(hidden[-1], state)  # h_t scores the source
        features = torch.tanh(F.linear(torch.cat([context, hidden[-1]], dim=1), w.combine))
        return features, hidden, cell, features, weights  # (R, Ds): h~_t

    def _read(self, emb: Tensor, state: LeanRNNState) -> _Features:
        """Bahdanau (``s_{t-1}`` scores the source) or the fixed context (no score): ``s_t``
        from ``[E y; c_t]``, then the maxout readout of ``[s_t; c_t; E y]``."""
        weights = None
        if self.weights.score is not None:
            context, weights = self._attend(state.hidden[-1], state)  # s_{t-1} scores
        else:
            assert state.context is not None  # set by init_state
            g, d = state.context.shape
            context = state.context[:, None].expand(g, state.group, d).reshape(-1, d)
        hidden, cell = self._cells(torch.cat([emb, context], dim=1), state)
        features = self._maxout(torch.cat([hidden[-1], context, emb], dim=1))  # (R, Ds)
        return features, hidden, cell, None, weights

    def _cells(
        self, x: Tensor, state: LeanRNNState
    ) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...] | None]:
        """The stacked cells over one step's input ``x (R, I)``: each layer's new ``h`` (and
        ``c``); a layer's output is the next layer's input."""
        w = self.weights
        hidden, cells = [], []
        for i, layer in enumerate(w.cells):
            h = state.hidden[i]  # (R, Ds)
            ds = h.size(1)
            if w.lstm:
                assert state.cell is not None  # an LSTM's state has cells
                gates = F.linear(torch.cat([x, h], dim=1), layer.weight, layer.bias)  # (R, 4 Ds)
                i_, f, g, o = gates.chunk(4, dim=1)
                c = torch.sigmoid(f) * state.cell[i] + torch.sigmoid(i_) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                cells.append(c)
            else:
                assert layer.hidden_weight is not None  # a GRU's layer
                gx = F.linear(x, layer.weight, layer.bias)  # (R, 3 Ds)
                gh = F.linear(h, layer.hidden_weight, layer.hidden_bias)  # (R, 3 Ds)
                r, z = torch.sigmoid(gx[:, : 2 * ds] + gh[:, : 2 * ds]).chunk(2, dim=1)
                n = torch.tanh(gx[:, 2 * ds :] + r * gh[:, 2 * ds :])
                h = n + z * (h - n)  # (1 - z) n + z h, as ATen's GRU cell computes it
            hidden.append(h)
            x = h
        return tuple(hidden), tuple(cells) if w.lstm else None

    def _attend(self, query: Tensor, state: LeanRNNState) -> tuple[Tensor, Tensor]:
        """The ``K`` rows of each sentence score its prepared keys as ``K`` queries: context
        ``(R, 2He)`` and weights ``(G, K, S)``, exactly 0 on padding."""
        w, keys, memory = self.weights, state.keys, state.memory
        assert keys is not None and memory is not None  # an attending decoder's state
        g = state.keep.size(0)
        q = query.view(g, state.group, -1)  # (G, K, Ds)
        if isinstance(w.score, Additive):  # v^T tanh(W q + U h)
            wq = F.linear(q, w.score.query_proj.weight.detach())  # (G, K, A)
            hidden = torch.tanh(wq[:, :, None] + keys[:, None])  # (G, K, S, A)
            energies = hidden @ w.score.v.weight.detach()[0]  # (G, K, S)
        else:  # dot or general, keys (G, S, Ds)
            energies = q @ keys.transpose(1, 2)  # (G, K, S)
        weights = masked_softmax(energies, state.keep)  # keep (G, 1, S) over the K rows
        context = weights @ memory  # (G, K, 2He)
        return context.view(query.size(0), -1), weights

    def _maxout(self, x: Tensor) -> Tensor:
        """The readout ``max_k (W x)_{i,k}`` over the maxout's pieces: ``(R, Ds)``."""
        w = self.weights
        assert w.readout is not None  # Bahdanau and the fixed-context decoder have one
        pieces = F.linear(x, *w.readout)  # (R, Ds * pool)
        return pieces.view(x.size(0), -1, w.pool).amax(dim=-1)  # (R, Ds)

    def select_state(self, state: LeanRNNState, index: Tensor) -> LeanRNNState:
        """Rows ``index (R',)`` of the state. The rows of each sentence must stay together and
        in order of their sentences (what greedy and beam search do); the sentences' source
        sides are selected only when sentences leave or repeat."""
        runs, group = select_sentences(index, state.group, state.keep.size(0), type(self).__name__)
        if runs is not None:
            state = replace(
                state,
                keep=state.keep.index_select(0, runs),
                memory=_rows(state.memory, runs),
                keys=_rows(state.keys, runs),
                context=_rows(state.context, runs),
            )
        rows = state.hidden[0].size(0)
        if index.numel() == rows and bool((index == torch.arange(rows, device=index.device)).all()):
            return replace(state, group=group)
        return replace(
            state,
            hidden=tuple(h.index_select(0, index) for h in state.hidden),
            cell=None
            if state.cell is None
            else tuple(c.index_select(0, index) for c in state.cell),
            feed=_rows(state.feed, index),
            group=group,
        )


def _rows(tensor: Tensor | None, index: Tensor) -> Tensor | None:
    return None if tensor is None else tensor.index_select(0, index)


def decode_weights(model: Seq2SeqRNN) -> RNNDecodeWeights:
    """``model``'s weights fused for :class:`LeanRNNDecoder`: copies, kept on the model until any
    parameter changes (:func:`~qkv.layers.packed_linear.packed_for`)."""
    return packed_for(model, "float32", lambda: RNNDecodeWeights(model))


def has_lean_step(model: object) -> bool:
    """Whether :class:`LeanRNNDecoder` can decode ``model``: a Seq2SeqRNN without a copy head."""
    return isinstance(model, Seq2SeqRNN) and model.copy_head is None

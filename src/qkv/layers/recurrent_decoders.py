"""The three decoders of the RNN encoder-decoders, on the shared state and step of
:class:`~qkv.layers.recurrent.RecurrentDecoder`:

* :class:`FixedContextDecoder`: Cho et al. 2014, section 2.2: one context ``c`` for the whole
  sentence, ``s_t = f(s_{t-1}, y_{t-1}, c)``. The bottleneck baseline.
* :class:`BahdanauDecoder`: Bahdanau et al. 2015, eq. (4)-(6) and (A.1.2): the previous state
  scores every source state, ``e_tj = v^T tanh(W s_{t-1} + U h_j)``; with ``coverage=True``
  also ``+ w_c c_tj`` (See et al. 2017, eq. 11), the attention summed over past steps.
* :class:`LuongDecoder`: Luong et al. 2015, eq. (5), (7), (8) and section 3.3: the current state
  scores the source, ``h~_t = tanh(W_c [c_t; h_t])``, with input feeding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import torch
from torch import Tensor, nn

from qkv.attention.scores import Additive, Score
from qkv.layers.recurrent import EncoderOutput, Maxout, RecurrentDecoder, RecurrentState


class FixedContextDecoder(RecurrentDecoder):
    """Cho et al. 2014, section 2.2: ``s_t = f(s_{t-1}, [E y_{t-1}; c])`` and
    ``g = maxout(W [s_t; c; E y_{t-1}])`` with the same context ``c`` at every step.

    ``c`` is the encoder's top-layer ``[h->_last; h<-_first]``: the decoder never sees any other
    encoder state. No attention weights.
    """

    def __init__(
        self,
        cell: str,
        embed_dim: int,
        memory_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__(cell, embed_dim + memory_dim, memory_dim, hidden_dim, num_layers, dropout)
        self.readout = Maxout(hidden_dim + memory_dim + embed_dim, hidden_dim)

    def init_state(self, encoded: EncoderOutput) -> RecurrentState:
        return replace(super().init_state(encoded), context=encoded.final[:, -1])  # (B, 2He)

    def step(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = True
    ) -> tuple[Tensor, RecurrentState, Tensor | None]:
        context = state.context  # (B, 2He), the same at every step
        assert context is not None  # set by init_state
        x = torch.cat([emb, context], dim=-1).unsqueeze(1)  # (B, 1, E + 2He)
        out, state = self._run_rnn(x, state)
        out = out.squeeze(1)  # (B, Ds)
        return self.readout(torch.cat([out, context, emb], dim=-1)), state, None

    def forward(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        # c is the same at every step, so the RNN runs over the whole sequence in one call.
        assert state.context is not None  # set by init_state
        context = state.context.unsqueeze(1).expand(-1, emb.size(1), -1)  # (B, T, 2He)
        out, _ = self._run_rnn(torch.cat([emb, context], dim=-1), state)  # (B, T, Ds)
        return self.readout(torch.cat([out, context, emb], dim=-1)), None


class BahdanauDecoder(RecurrentDecoder):
    """Bahdanau et al. 2015, eq. (4)-(6): attend with ``s_{t-1}``, then update the state.

        e_tj = score(s_{t-1}, h_j)          (A.1.2: v^T tanh(W s_{t-1} + U h_j))
        c_t  = sum_j softmax_j(e_tj) h_j
        s_t  = f(s_{t-1}, [E y_{t-1}; c_t])
        g    = maxout(W [s_t; c_t; E y_{t-1}])   (eq. 4 reads the new s_t)

    ``U h_j`` is computed once per sentence (:meth:`init_state`) and reused at every step. The
    query is the top layer's state.

    With coverage (See et al. 2017, eq. 10-11) the score also reads ``c_tj = sum_{t'<t} a_t'j``,
    carried in :attr:`RecurrentState.coverage`:

        e_tj = v^T tanh(W s_{t-1} + U h_j + b + w_c c_tj)

    ``w_c`` (:attr:`coverage_weight`, ``(A,)``) starts at zero, so a decoder with coverage
    computes exactly what the same weights compute without it (a final coverage phase starts
    from the model it continues). The pointer-generator that copies with this attention
    (``copy_attention="decoder"``) computes the coverage loss from the weights.

    Args:
        score: a score taking queries of width ``Ds`` and keys of width ``2He``; defaults to
            ``Additive(Ds, 2He, Ds)``.
        coverage: add ``w_c c_tj`` to the score; needs an :class:`Additive` score (the term
            enters its hidden layer, before the ``tanh``).
    """

    def __init__(
        self,
        cell: str,
        embed_dim: int,
        memory_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        *,
        score: Score | None = None,
        coverage: bool = False,
    ) -> None:
        super().__init__(cell, embed_dim + memory_dim, memory_dim, hidden_dim, num_layers, dropout)
        self.score = Additive(hidden_dim, memory_dim, hidden_dim) if score is None else score
        self.readout = Maxout(hidden_dim + memory_dim + embed_dim, hidden_dim)
        self.coverage_weight: nn.Parameter | None = None
        if coverage:
            if not isinstance(self.score, Additive):
                raise ValueError(
                    "coverage enters an additive score's hidden layer (See et al. 2017, eq. 11); "
                    f"got a {type(self.score).__name__} score: pass an Additive one"
                )
            width = self.score.key_proj.out_features  # A
            self.coverage_weight = nn.Parameter(torch.zeros(width))  # w_c, zero: no change

    def init_state(self, encoded: EncoderOutput) -> RecurrentState:
        state = super().init_state(encoded)
        if self.coverage_weight is None:
            return state
        return replace(state, coverage=encoded.memory.new_zeros(encoded.memory.shape[:2]))

    def _attend_covered(
        self, query: Tensor, state: RecurrentState, need_weights: bool
    ) -> tuple[Tensor, Tensor | None, RecurrentState]:
        """:meth:`_attend`, with ``w_c c_tj`` added to the prepared keys and the coverage
        advanced by this step's weights when the decoder has coverage."""
        if self.coverage_weight is None:
            return (*self._attend(query, state, need_weights), state)
        coverage, keys = state.coverage, state.keys
        assert coverage is not None and keys is not None  # init_state set them
        covered = keys + coverage[..., None] * self.coverage_weight  # (B, S, A)
        context, weights = self._attend(query, replace(state, keys=covered), True)
        assert weights is not None  # asked for
        return context, weights, replace(state, coverage=coverage + weights)  # (B, S)

    def _update(
        self, emb: Tensor, state: RecurrentState, need_weights: bool
    ) -> tuple[Tensor, Tensor, RecurrentState, Tensor | None]:
        """Attend with ``s_{t-1}``, then ``s_t``: returns ``s_t (B, Ds)``, ``c_t (B, 2He)``,
        the new state and the weights."""
        query = state.hidden[:, -1:]  # (B, 1, Ds): the top layer
        context, weights, state = self._attend_covered(query, state, need_weights)
        out, state = self._run_rnn(torch.cat([emb, context], dim=-1).unsqueeze(1), state)
        return out.squeeze(1), context, state, weights  # (B, 1, Ds) -> (B, Ds)

    def step(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = True
    ) -> tuple[Tensor, RecurrentState, Tensor | None]:
        out, context, state, weights = self._update(emb, state, need_weights)
        return self.readout(torch.cat([out, context, emb], dim=-1)), state, weights  # (B, Ds)

    def forward(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        # The recurrence needs s_t and c_t only; the readout runs once over the whole sequence.
        outs, contexts, weights = [], [], []
        for t in range(emb.size(1)):
            out, context, state, w = self._update(emb[:, t], state, need_weights)
            outs.append(out)
            contexts.append(context)
            weights.append(w)
        features = self.readout(
            torch.cat([torch.stack(outs, 1), torch.stack(contexts, 1), emb], dim=-1)
        )  # (B, T, Ds)
        # _attend returns weights at every step when asked for them.
        stacked = torch.stack(cast("list[Tensor]", weights), 1) if need_weights else None
        return features, stacked  # (B, T, S)


class LuongDecoder(RecurrentDecoder):
    """Luong et al. 2015: update the state, then attend with it; input feeding.

        h_t  = f(h_{t-1}, [E y_{t-1}; h~_{t-1}])   (section 3.3, h~_0 = 0)
        a_t  = softmax_s(score(h_t, h_s))           (eq. 7; dot, general or concat, eq. 8)
        c_t  = sum_s a_ts h_s
        h~_t = tanh(W_c [c_t; h_t])                 (eq. 5; the features, eq. 6 maps them to V)

    Args:
        score: ``Dot()`` (needs ``Ds == 2He``), ``General(Ds, 2He)`` or
            ``Additive(Ds, 2He, A, bias=False)`` (concat).
    """

    def __init__(
        self,
        cell: str,
        embed_dim: int,
        memory_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        *,
        score: Score,
    ) -> None:
        super().__init__(cell, embed_dim + hidden_dim, memory_dim, hidden_dim, num_layers, dropout)
        self.score = score
        self.combine = nn.Linear(memory_dim + hidden_dim, hidden_dim, bias=False)  # W_c

    def init_state(self, encoded: EncoderOutput) -> RecurrentState:
        state = super().init_state(encoded)
        feed = state.hidden.new_zeros(state.hidden.size(0), self.hidden_dim)  # (B, Ds): h~_0
        return replace(state, feed=feed)

    def step(
        self, emb: Tensor, state: RecurrentState, *, need_weights: bool = True
    ) -> tuple[Tensor, RecurrentState, Tensor | None]:
        assert state.feed is not None  # set by init_state
        x = torch.cat([emb, state.feed], dim=-1).unsqueeze(1)  # (B, 1, E + Ds)
        out, state = self._run_rnn(x, state)  # (B, 1, Ds): h_t
        context, weights = self._attend(out, state, need_weights)  # (B, 2He), (B, S)
        attentional = torch.tanh(self.combine(torch.cat([context, out.squeeze(1)], dim=-1)))
        return attentional, replace(state, feed=attentional), weights

"""DrQA's document reader: the answer to a question is a span of the passage.

Chen, Fisch, Weston, Bordes 2017, "Reading Wikipedia to Answer Open-Domain Questions", sec. 3.2:

    passage p (B, S), question q (B, Q): word ids, one shared embedding E
        |
    passage token features  p~_i = [E(p_i); f_align(p_i); f_em(p_i)]
        f_align(p_i) = Σ_j a_ij E(q_j),  a_ij ∝ exp(α(E(p_i)) . α(E(q_j))),  α = ReLU(Linear)
        f_em(p_i)    = 1 if p_i occurs in the question (ids compared; lower-casing is the task's)
        |
    passage BiLSTM stack -> p_i (B, S, 2H)        question BiLSTM stack -> q_j (B, Q, 2H)
        |                                          q = Σ_j b_j q_j,  b_j ∝ exp(w . q_j)
    SpanPointer:  P_start(i) ∝ exp(p_i W_s q),  P_end(i) ∝ exp(p_i W_e q)
        |
    start_log_probs, end_log_probs (B, S);  decode: the best span i <= j < i + 15

The aligned embedding and the question pooling attend through :func:`qkv.attention.attend` with a
:class:`~qkv.attention.scores.Dot` score; the start and end energies are the
:class:`~qkv.attention.scores.General` (bilinear) score's, normalised by a log-softmax over the
passage (a pointer's loss needs log-probabilities, which ``attend`` does not return). DrQA's
part-of-speech, entity and term-frequency features are left out (they need a tagger), and its
layers' outputs are not concatenated: the top layer is the passage encoding.

:class:`SpanPointer` is the head alone, so that another encoder (a fine-tuned MiniLM whose token
states give both ``p_i`` and ``q_j``) can point with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qkv.attention.core import attend
from qkv.attention.pointer import best_span, masked_log_softmax
from qkv.attention.scores import Dot, General
from qkv.config_values import check_bools, check_fractions, check_positive_ints, ranged
from qkv.layers.packed_rnn import BiRNN, check_prefix_keep, check_word_ids
from qkv.models.outputs import SpanOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sizes import check_parameters, recurrent_layers

__all__ = ["PRESETS", "SpanDecoding", "SpanPointer", "SpanReader", "SpanReaderConfig"]

PRESETS = TABLE["span_reader"]


@dataclass(frozen=True)
class SpanReaderConfig(Presets, family="span_reader", sizes=("vocab_size",)):
    """Sizes of a :class:`SpanReader`.

    Args:
        vocab_size: ``V``, the shared vocabulary of passages and questions.
        embed_dim: ``E``, the word embedding width.
        hidden_dim: ``H``, LSTM units per direction (encodings are ``2H`` wide).
        num_layers: stacked BiLSTM layers of the passage encoder, and of the question's.
        dropout: on the word embeddings and between LSTM layers (training only).
        exact_match: add DrQA's binary "this passage word occurs in the question" feature.
        aligned: add DrQA's aligned question embedding ``f_align``.
        max_answer_length: the most tokens :meth:`SpanReader.decode` lets a span cover.
        pad_id: the padding id (its embedding is zero and gets no gradient).
    """

    vocab_size: int
    embed_dim: int = 128
    hidden_dim: int = 128
    num_layers: int = 2
    dropout: float = 0.2
    exact_match: bool = True
    aligned: bool = True
    max_answer_length: int = 15
    pad_id: int = ranged(0, "[0, vocab_size)")

    def __post_init__(self) -> None:
        check_positive_ints(
            self, ("vocab_size", "embed_dim", "hidden_dim", "num_layers", "max_answer_length")
        )
        check_fractions(self, ("dropout",))
        check_bools(self, ("exact_match", "aligned"))
        pad = self.pad_id
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < self.vocab_size:
            raise ValueError(
                f"pad_id must be an int in [0, vocab_size={self.vocab_size}), got {pad!r}"
            )
        e, h, layers, d = self.embed_dim, self.hidden_dim, self.num_layers, 2 * self.hidden_dim
        passage = 2 * recurrent_layers(layers, self.passage_input_dim, h)  # two directions
        question = 2 * recurrent_layers(layers, e, h)
        align = e * e if self.aligned else 0
        check_parameters(
            self,
            self.vocab_size * e + passage + question + align + 2 * d * d,
            ("vocab_size", "embed_dim", "hidden_dim", "num_layers"),
        )

    @property
    def passage_input_dim(self) -> int:
        """Width of a passage token's features: ``E`` (+ ``E`` aligned) (+ 1 exact match)."""
        return self.embed_dim * (1 + int(self.aligned)) + int(self.exact_match)


class SpanPointer(nn.Module):
    """DrQA's answer head: pool the question, point at the start and the end in the passage.

    ``b_j ∝ exp(w . q_j)``, ``q = Σ_j b_j q_j`` (the pooling attends through ``attend`` with a
    :class:`Dot` score and the learned query ``w``); ``P_start(i) ∝ exp(q^T W_s p_i)`` and
    ``P_end(i) ∝ exp(q^T W_e p_i)`` (two :class:`General` scores).

    Args:
        passage_dim: ``Dp``, the width of the passage states.
        question_dim: ``Dq``, the width of the question states.

    Shape:
        ``passage_states (B, S, Dp)``, ``passage_keep (B, S)`` boolean, ``question_states
        (B, Q, Dq)``, ``question_keep (B, Q)`` boolean (any pattern: the two may be positions
        of one sequence; at least one kept position per row) -> ``(start_log_probs (B, S),
        end_log_probs (B, S), question_weights (B, Q))``; the log-probabilities are the dtype's
        minimum (finite) where ``passage_keep`` is false.
    """

    def __init__(self, passage_dim: int, question_dim: int) -> None:
        super().__init__()
        if passage_dim < 1 or question_dim < 1:
            raise ValueError(
                f"SpanPointer needs positive widths, got passage_dim={passage_dim}, "
                f"question_dim={question_dim}"
            )
        self.pool_query = nn.Parameter(torch.randn(question_dim) * question_dim**-0.5)  # w
        self.pool_score = Dot()
        self.start_score = General(question_dim, passage_dim)  # W_s
        self.end_score = General(question_dim, passage_dim)  # W_e

    def forward(
        self,
        passage_states: Tensor,
        passage_keep: Tensor,
        question_states: Tensor,
        question_keep: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        _check_states(passage_states, passage_keep, "passage")
        _check_states(question_states, question_keep, "question")
        if passage_states.size(0) != question_states.size(0):
            raise ValueError(
                f"passage_states {tuple(passage_states.shape)} and question_states "
                f"{tuple(question_states.shape)} differ in batch size"
            )
        b = question_states.size(0)
        w = self.pool_query.to(question_states.dtype).expand(b, 1, -1)  # (B, 1, Dq)
        pooled = attend(
            w,
            question_states,
            question_states,
            score=self.pool_score,
            keep=question_keep[:, None, :],  # (B, 1, Q)
            need_weights=True,
        )  # context (B, 1, Dq), weights (B, 1, Q)
        assert pooled.weights is not None  # need_weights=True
        q = pooled.context
        start = self.start_score(q, passage_states).squeeze(1)  # (B, 1, S) -> (B, S)
        end = self.end_score(q, passage_states).squeeze(1)  # (B, 1, S) -> (B, S)
        return (
            masked_log_softmax(start, passage_keep),
            masked_log_softmax(end, passage_keep),
            pooled.weights.squeeze(1),
        )


class SpanDecoding:
    """What a span reader with ``config.max_answer_length`` answers: :meth:`decode`."""

    config: Any

    def decode(self, output: SpanOutput, passage_keep: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The best span of each row, at most ``config.max_answer_length`` words:
        ``(start (B,), end (B,) inclusive, log score (B,))``
        (:func:`qkv.attention.pointer.best_span`)."""
        return best_span(
            output.start_log_probs,
            output.end_log_probs,
            passage_keep,
            self.config.max_answer_length,
        )


class SpanReader(SpanDecoding, nn.Module):
    """DrQA's document reader (module docstring).

    Args:
        config: a :class:`SpanReaderConfig`.

    Shape:
        ``passage (B, S)``, ``question (B, Q)`` long ids; ``passage_keep (B, S)``,
        ``question_keep (B, Q)`` boolean, ``True`` at real tokens (real tokens first, at least
        one per row) -> :class:`~qkv.models.outputs.SpanOutput`.
    """

    def __init__(self, config: SpanReaderConfig) -> None:
        super().__init__()
        self.config = c = config
        e, h = c.embed_dim, c.hidden_dim
        self.embed = nn.Embedding(c.vocab_size, e, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        self.align_proj = nn.Linear(e, e) if c.aligned else None  # α's Linear
        self.align_score = Dot()
        self.passage_rnn = BiRNN("lstm", c.passage_input_dim, h, c.num_layers, c.dropout)
        self.question_rnn = BiRNN("lstm", e, h, c.num_layers, c.dropout)
        self.pointer = SpanPointer(2 * h, 2 * h)

    def features(
        self, passage: Tensor, passage_keep: Tensor, question: Tensor, question_keep: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """What the two encoders read: the passage's ``(B, S, F)`` features ``[E(p_i);
        f_align(p_i); f_em(p_i)]`` (``F`` is :attr:`SpanReaderConfig.passage_input_dim`; the
        embeddings after dropout), the question's embeddings ``(B, Q, E)``, and the aligned
        embedding's attention ``(B, S, Q)`` (zero rows at padded passage positions) or
        ``None``."""
        self._check_ids(passage, "passage")
        self._check_ids(question, "question")
        if question.size(0) != passage.size(0):
            raise ValueError(
                f"question {tuple(question.shape)} and passage {tuple(passage.shape)} differ in "
                "batch size"
            )
        p = self.dropout(self.embed(passage))  # (B, S, E)
        q = self.dropout(self.embed(question))  # (B, Q, E)
        parts, aligned = [p], None
        if self.align_proj is not None:
            a_p = torch.relu(self.align_proj(p))  # α(E(p_i)): (B, S, E)
            a_q = torch.relu(self.align_proj(q))  # α(E(q_j)): (B, Q, E)
            out = attend(
                a_p,
                a_q,
                q,
                score=self.align_score,
                keep=passage_keep[:, :, None] & question_keep[:, None, :],  # (B, S, Q)
                need_weights=True,
            )  # context (B, S, E), weights (B, S, Q)
            parts.append(out.context)
            aligned = out.weights
        if self.config.exact_match:
            same = passage[:, :, None] == question[:, None, :]  # (B, S, Q)
            em = (same & question_keep[:, None, :]).any(dim=-1)  # (B, S)
            parts.append(em.unsqueeze(-1).to(p.dtype))  # (B, S, 1)
        return torch.cat(parts, dim=-1), q, aligned

    def forward(
        self, passage: Tensor, passage_keep: Tensor, question: Tensor, question_keep: Tensor
    ) -> SpanOutput:
        """Start and end log-probabilities over the passage; see the class docstring."""
        passage_lengths = check_prefix_keep(passage_keep, passage, "passage")
        question_lengths = check_prefix_keep(question_keep, question, "question")
        x, q, aligned = self.features(passage, passage_keep, question, question_keep)
        passage_states = self.passage_rnn(x, passage_lengths).states  # (B, S, 2H)
        question_states = self.question_rnn(q, question_lengths).states  # (B, Q, 2H)
        start, end, weights = self.pointer(
            passage_states, passage_keep, question_states, question_keep
        )
        return SpanOutput(start, end, weights, aligned)

    def _check_ids(self, ids: Tensor, name: str) -> None:
        check_word_ids(ids, name, self.config.vocab_size)


def _check_states(states: Tensor, keep: Tensor, name: str) -> None:
    if states.dim() != 3 or not states.dtype.is_floating_point:
        raise ValueError(
            f"{name}_states must be a (B, L, D) float tensor, got shape {tuple(states.shape)} "
            f"and dtype {states.dtype}"
        )
    if keep.dtype != torch.bool or keep.shape != states.shape[:2]:
        raise ValueError(
            f"{name}_keep must be a boolean tensor of shape {tuple(states.shape[:2])}, got shape "
            f"{tuple(keep.shape)} and dtype {keep.dtype}"
        )
    empty = (~keep.any(dim=-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{name}_keep has no kept position in batch row(s) {empty}")

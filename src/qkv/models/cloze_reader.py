"""Cloze readers: pick the word that fills the blank of a question from a passage's candidates.

    passage (B, S), question (B, Q) with its blank (XXXXX), candidates (B, C): word ids
        |  one shared embedding E (padding_idx = pad_id); with question_feature, each passage
        |  word's embedding gets one more input: 1 if the word occurs in the question, else 0
    passage BiGRU -> y_t (B, S, 2H)          question BiGRU -> u = [y->_|q|; y<-_1] (B, 2H)
        |
    reader:
      no_attention  g = tanh(W [p; u]), p the passage's final states      score(c) = (U g) . E(c)
      attentive     s = softmax_t(w^T tanh(W_ym y_t + W_um u)), r = Σ s_t y_t,
                    g = tanh(W_rg r + W_ug u)                             score(c) = (U g) . E(c)
      stanford      α = softmax_i(u^T W_s y_i), o = Σ α_i y_i             score(c) = (W_a o) . E(c)
    (E(c): the input embedding, or with tie_output=False an output embedding of its own)
      as_reader     s = softmax_i(y_i . u)                   P(c) ∝ Σ_{i: passage_i = c} s_i
        |
    log_probs (B, C) over the candidates, attention (B, S)

* ``no_attention`` and ``attentive``: Hermann et al. 2015, "Teaching Machines to Read and
  Comprehend", sec. 4 (the Attentive Reader's eq. for ``m(t)``, ``s(t)``, ``r``, ``g``; the
  baseline drops the attention and reads the passage's final states instead of ``r``);
* ``stanford``: Chen, Bolton, Manning 2016, "A Thorough Examination of the CNN/Daily Mail Reading
  Comprehension Task", sec. 3.2, eq. (1)-(3): bilinear attention, and the candidate scored by
  ``W_a o`` against its embedding (by default the input embedding; ``tie_output=False`` gives
  the candidates an output matrix of their own, as the paper's ``W_a`` is);
* ``as_reader``: Kadlec, Schmid, Bajgar, Kleindienst 2016, "Text Understanding with the
  Attention Sum Reader Network", eq. (1)-(4): dot-product attention whose weights *are* the
  answer, summed over each candidate's occurrences (:mod:`qkv.attention.pointer`). The sum is
  normalised over the candidates (the ``∝`` of eq. (3)), so the log-probabilities of every
  reader sum to one over the kept candidates; the candidates of one example should differ.
* ``question_feature``: the "word occurs in the question" input of Dhingra et al. 2017 (the
  Gated-Attention Reader's ``qe-comm`` feature), for every reader.

All attention goes through :func:`qkv.attention.attend`, with the score object of each paper
(:class:`~qkv.attention.scores.Additive`, :class:`~qkv.attention.scores.General`,
:class:`~qkv.attention.scores.Dot`). Candidates are word ids in the shared vocabulary: the task
maps an out-of-vocabulary word to a per-example unknown slot, so equal ids are equal words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.core import attend, softmax_dtype
from qkv.attention.pointer import masked_log_softmax, occurrences, pointer_sum
from qkv.attention.scores import Additive, Dot, General, Score
from qkv.config_values import (
    check_bools,
    check_choice,
    check_fractions,
    check_positive_ints,
    ranged,
)
from qkv.layers.packed_rnn import BiRNN, PackedRun, check_prefix_keep, check_word_ids
from qkv.models.outputs import ReaderOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sizes import check_parameters, recurrent_layers

__all__ = ["PRESETS", "READERS", "ClozeReader", "ClozeReaderConfig"]

PRESETS = TABLE["cloze_reader"]


@dataclass(frozen=True)
class _Parts:
    """What one reader is made of: its attention ``score(d, attention_dim)`` (``None``: it
    reads the passage's final states instead), whether ``g = tanh(W [read; u])`` combines what
    it read with the question before matching the candidates, and whether the answer is the
    attention mass on each candidate (a pointer) rather than a match with its embedding."""

    score: Callable[[int, int], Score] | None
    combine: bool = False
    pointer: bool = False


PARTS: dict[str, _Parts] = {
    "no_attention": _Parts(None, combine=True),
    "attentive": _Parts(lambda d, a: Additive(d, d, a, bias=False), combine=True),  # w, W_um, W_ym
    "stanford": _Parts(lambda d, a: General(d, d)),  # W_s
    "as_reader": _Parts(lambda d, a: Dot(), pointer=True),
}
READERS = tuple(PARTS)
RNNS = {"gru": 3, "lstm": 4}  # each cell and its gates


@dataclass(frozen=True)
class ClozeReaderConfig(Presets, family="cloze_reader", sizes=("vocab_size",)):
    """Sizes of a :class:`ClozeReader`.

    Args:
        vocab_size: ``V``, the shared vocabulary of passages, questions and candidates.
        reader: one of :data:`READERS`.
        embed_dim: ``E``, the word embedding width.
        hidden_dim: ``H``, recurrent units per direction (encodings are ``2H`` wide).
        rnn: the passage and question encoders' cell, ``gru`` (Kadlec et al.; Chen et al.) or
            ``lstm`` (Hermann et al.).
        attention_dim: the additive score's hidden width (``attentive`` only).
        dropout: on the word embeddings of passage and question (training only).
        pad_id: the padding id (its embedding is zero and gets no gradient).
        tie_output: the candidates are matched against the input embedding (``True``) or an
            output embedding of their own (``False``); readers that match (all but
            ``as_reader``, which refuses ``False``).
        question_feature: each passage word's input also says whether the word occurs in the
            question.
    """

    vocab_size: int
    reader: str = "as_reader"
    embed_dim: int = 128
    hidden_dim: int = 128
    attention_dim: int = 128
    dropout: float = 0.1
    pad_id: int = ranged(0, "[0, vocab_size)")
    rnn: str = "gru"
    tie_output: bool = True
    question_feature: bool = False

    def __post_init__(self) -> None:
        check_positive_ints(self, ("vocab_size", "embed_dim", "hidden_dim", "attention_dim"))
        check_choice("reader", self.reader, READERS)
        check_choice("rnn", self.rnn, RNNS)
        check_fractions(self, ("dropout",))
        _check_pad_id(self.pad_id, self.vocab_size)
        check_bools(self, ("tie_output", "question_feature"))
        if not self.tie_output and PARTS[self.reader].pointer:
            raise ValueError(
                f"tie_output=False gives the candidates an output embedding, but the {self.reader} "
                "reader points at the passage and matches no embedding: remove tie_output"
            )
        e, h, d = self.embed_dim, self.hidden_dim, 2 * self.hidden_dim
        f = int(self.question_feature)
        # passage (with the question feature) and question, two directions each
        encoders = 2 * (
            recurrent_layers(1, e + f, h, gates=RNNS[self.rnn])
            + recurrent_layers(1, e, h, gates=RNNS[self.rnn])
        )
        head = {
            "no_attention": 2 * d * d + d * e,  # W, U
            "attentive": 2 * d * self.attention_dim + 2 * d * d + d * e,  # W_ym, W_um; W_rg...
            "stanford": d * d + d * e,  # W_s, W_a
            "as_reader": 0,
        }[self.reader]
        output = 0 if self.tie_output else self.vocab_size * e
        check_parameters(
            self,
            self.vocab_size * e + output + encoders + head,
            ("vocab_size", "embed_dim", "hidden_dim", "attention_dim"),
        )


class ClozeReader(nn.Module):
    """A reader that scores each candidate word as the filler of the question's blank.

    Args:
        config: a :class:`ClozeReaderConfig`.

    Shape:
        ``passage (B, S)``, ``question (B, Q)``, ``candidates (B, C)`` long ids; their ``*_keep``
        boolean masks of the same shapes, ``True`` at real tokens (passage and question: real
        tokens first, at least one per row; candidates: any, at least one per row) ->
        :class:`~qkv.models.outputs.ReaderOutput` with ``log_probs (B, C)`` and
        ``attention (B, S)`` (``None`` for ``no_attention``).
    """

    def __init__(self, config: ClozeReaderConfig) -> None:
        super().__init__()
        self.config = c = config
        e, d = c.embed_dim, 2 * c.hidden_dim
        self.embed = nn.Embedding(c.vocab_size, e, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        self.passage_rnn = BiRNN(c.rnn, e + int(c.question_feature), c.hidden_dim)
        self.question_rnn = BiRNN(c.rnn, e, c.hidden_dim)
        parts = self.parts = PARTS[c.reader]
        self.score = None if parts.score is None else parts.score(d, c.attention_dim)
        # W [p; u] or W_rg r + W_ug u
        self.combine = nn.Linear(2 * d, d) if parts.combine else None
        # U, or W_a for the Stanford reader
        self.output_proj = None if parts.pointer else nn.Linear(d, e, bias=False)
        # the candidates' output embedding, when not the input's
        self.answer_embed = None if c.tie_output else nn.Embedding(c.vocab_size, e, c.pad_id)

    def encode(
        self, passage: Tensor, passage_keep: Tensor, question: Tensor, question_keep: Tensor
    ) -> tuple[PackedRun, PackedRun]:
        """The passage's and the question's BiGRU runs: ``states (B, L, 2H)`` and ``final
        (B, 2H)`` each (the question vector ``u`` is the question's ``final``)."""
        passage_lengths = check_prefix_keep(passage_keep, passage, "passage")
        question_lengths = check_prefix_keep(question_keep, question, "question")
        if question.size(0) != passage.size(0):
            raise ValueError(
                f"question {tuple(question.shape)} and passage {tuple(passage.shape)} differ in "
                "batch size"
            )
        self._check_ids(passage, "passage")
        self._check_ids(question, "question")
        p = self.dropout(self.embed(passage))  # (B, S, E)
        q = self.dropout(self.embed(question))  # (B, Q, E)
        if self.config.question_feature:
            seen = in_question(passage, question, question_keep).to(p.dtype)  # (B, S, 1)
            p = torch.cat([p, seen], -1)  # (B, S, E + 1)
        return (
            self.passage_rnn(p, passage_lengths),
            self.question_rnn(q, question_lengths),
        )

    def forward(
        self,
        passage: Tensor,
        passage_keep: Tensor,
        question: Tensor,
        question_keep: Tensor,
        candidates: Tensor,
        candidate_keep: Tensor,
    ) -> ReaderOutput:
        """Log-probabilities of the candidates; see the class docstring for the shapes."""
        self._check_candidates(candidates, candidate_keep, passage)
        passage_run, question_run = self.encode(passage, passage_keep, question, question_keep)
        y, u = passage_run.states, question_run.final  # (B, S, 2H), (B, 2H)
        weights = None
        read = passage_run.final  # (B, 2H): a reader without attention reads the final states
        if self.score is not None:
            out = attend(
                u.unsqueeze(1),  # (B, 1, 2H): one query per example
                y,
                y,
                score=self.score,
                keep=passage_keep[:, None, :],  # (B, 1, S)
                need_weights=True,
            )  # context (B, 1, 2H), weights (B, 1, S)
            assert out.weights is not None  # need_weights=True
            read, weights = out.context.squeeze(1), out.weights.squeeze(1)
        if self.parts.pointer:
            occurs = occurrences(passage, passage_keep, candidates)  # (B, C, S)
            assert weights is not None  # a pointer reader attends (its parts have a score)
            mass = pointer_sum(weights, occurs)  # (B, C)
            return ReaderOutput(_attention_sum(mass, candidate_keep), weights)
        g = read if self.combine is None else torch.tanh(self.combine(torch.cat([read, u], -1)))
        return ReaderOutput(self._match(g, candidates, candidate_keep), weights)

    def _match(self, g: Tensor, candidates: Tensor, candidate_keep: Tensor) -> Tensor:
        """``log softmax_c((U g) . E(c))`` over the kept candidates: ``(B, C)``."""
        assert self.output_proj is not None  # only pointer readers lack it; they never match
        target = self.output_proj(g)  # (B, E)
        embed = self.embed if self.answer_embed is None else self.answer_embed
        energies = embed(candidates) @ target.unsqueeze(-1)  # (B, C, 1)
        energies = energies.squeeze(-1)  # (B, C)
        return masked_log_softmax(energies, candidate_keep)

    def _check_ids(self, ids: Tensor, name: str) -> None:
        check_word_ids(ids, name, self.config.vocab_size)

    def _check_candidates(self, candidates: Tensor, keep: Tensor, passage: Tensor) -> None:
        self._check_ids(candidates, "candidates")
        if candidates.size(0) != passage.size(0):
            raise ValueError(
                f"candidates {tuple(candidates.shape)} and passage {tuple(passage.shape)} differ "
                "in batch size"
            )
        if keep.dtype != torch.bool or keep.shape != candidates.shape:
            raise ValueError(
                f"candidate_keep must be a boolean tensor of candidates' shape "
                f"{tuple(candidates.shape)}, got shape {tuple(keep.shape)} and dtype {keep.dtype}"
            )
        empty = (~keep.any(dim=-1)).nonzero().flatten().tolist()
        if empty:
            raise ValueError(f"no candidate in batch row(s) {empty}")


def in_question(passage: Tensor, question: Tensor, question_keep: Tensor) -> Tensor:
    """``(B, S, 1)``: 1.0 where the passage word's id is one of its question's real words, else
    0.0 (equal ids are equal words: unknown words have per-example slots)."""
    same = passage[:, :, None] == question[:, None, :]  # (B, S, Q)
    return (same & question_keep[:, None, :]).any(-1, keepdim=True).float()  # (B, S, 1)


def _attention_sum(mass: Tensor, keep: Tensor) -> Tensor:
    """``log P(c)`` with ``P(c) = mass(c) / Σ_c' mass(c')`` over the kept candidates.

    A mass is clamped at the dtype's smallest normal number, so a candidate that never occurs in
    the passage keeps a finite log-probability (about -87 in float32) and gradients stay finite;
    masked candidates get the dtype's minimum.
    """
    mass = mass.to(softmax_dtype(mass.dtype)).clamp_min(torch.finfo(mass.dtype).tiny)  # (B, C)
    mass = torch.where(keep, mass, torch.ones_like(mass))  # log(1) = 0: no NaN gradient below
    total = (mass * keep).sum(dim=-1, keepdim=True)  # (B, 1)
    log_probs = mass.log() - total.log()
    return log_probs.masked_fill(~keep, torch.finfo(log_probs.dtype).min)


def _check_pad_id(pad_id: object, vocab_size: int) -> None:
    if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id must be an int in [0, vocab_size={vocab_size}), got {pad_id!r}")

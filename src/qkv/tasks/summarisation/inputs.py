"""What summarisation and dialogue runs share: their configuration sections, the examples a
model reads (words, with a source's extended vocabulary for copying), batches and the loss.

A source is read as :func:`~qkv.data.pairs.summary_words.summary_tokens` plus ``</s>``; a target as
``<s> y`` (input) and ``y </s>`` (output). The loss is the negative log-likelihood of the target
words, summed over tokens (the engine divides by the token count):

* a plain model: cross-entropy over its vocabulary, an out-of-vocabulary target word being
  ``<unk>``;
* a pointer-generator (``model.copy: true``): ``-log P(y_t)`` of the mixture (See et al. 2017,
  eq. 6 and 9; :func:`~qkv.layers.copy.gold_log_probs`), a target word that is one of its
  source's out-of-vocabulary words scored by its extended id, so copying it is learnt;
* with coverage (``model.coverage: true``): plus ``train.coverage_weight`` times the coverage
  loss ``sum_i min(a_i^t, c_i^t)`` at every target token (eq. 13).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from qkv.data.errors import DataError
from qkv.data.pairs.batching import plan_by_cost
from qkv.data.pairs.summary_words import SummaryVocab, summary_tokens
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.layers.copy import gold_log_probs
from qkv.tasks.translation.config import MAX_BEAM_SIZE
from qkv.training.config import TrainConfig
from qkv.training.losses import sequence_cross_entropy

__all__ = [
    "SummaryBatch",
    "SummaryDataConfig",
    "SummaryDecodeConfig",
    "SummaryTrainConfig",
    "TextExample",
    "collate_examples",
    "encode_example",
    "example_batches",
    "text_loss",
]


@dataclass(frozen=True)
class SummaryDataConfig:
    """The ``data:`` section: a corpus of ``(source, target)`` pairs (any corpus of
    :mod:`qkv.data.pairs.registry`: ``docstrings``, ``aclsum``, ``plays-dialogue``, ``tsv``,
    ``files``) and the word vocabulary.

    Attributes:
        vocab_size: ``V``, special tokens included: the most frequent training words (sources
            and targets, one shared vocabulary so that a copied word has one id).
        min_count: a word needs this many training occurrences to enter the vocabulary.
        max_source_len: training sources are cut to this many tokens (See et al. cut their
            articles to 400); a longer input to summarise is read whole, with a warning.
        max_target_len: training pairs with a longer target are dropped.
        valid_examples: validation pairs decoded (greedily) at each evaluation to pick the best
            weights by ROUGE-L; ``0``: pick by validation loss.
    """

    corpus: str = "docstrings"
    options: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = 20_000
    min_count: int = 2
    max_source_len: int = 400
    max_target_len: int = 60
    valid_examples: int = 200

    def __post_init__(self) -> None:
        for name in ("vocab_size", "min_count", "max_source_len", "max_target_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"data.{name} must be a positive int, got {value!r}")
        if self.vocab_size < 16:
            raise ValueError(f"data.vocab_size must be >= 16, got {self.vocab_size}")
        if self.valid_examples < 0:
            raise ValueError(f"data.valid_examples must be >= 0, got {self.valid_examples}")


@dataclass(frozen=True)
class SummaryTrainConfig(TrainConfig):
    """The ``train:`` section: the engine's settings and ``coverage_weight``, the ``lambda`` of
    See et al.'s coverage loss (eq. 13; read by models with ``coverage: true``)."""

    coverage_weight: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        value = self.coverage_weight
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"train.coverage_weight must be a number >= 0, got {value!r}")


@dataclass(frozen=True)
class SummaryDecodeConfig:
    """The ``decode:`` section: beam search with the constraints summaries need.

    Attributes:
        beam_size: ``1`` is greedy search.
        length_penalty: ``alpha`` of the GNMT penalty.
        min_len, max_len: fewest and most output tokens (``</s>`` not counted).
        no_repeat_ngram: ``n > 0``: no output holds an ``n``-gram twice (``3``: Paulus et
            al.'s trigram block); ``0`` blocks nothing.
        batch_size: inputs decoded together.
    """

    beam_size: int = 4
    length_penalty: float = 1.0
    min_len: int = 0
    max_len: int = 60
    no_repeat_ngram: int = 0
    batch_size: int = 32

    def __post_init__(self) -> None:
        if not 1 <= self.beam_size <= MAX_BEAM_SIZE:
            raise ValueError(
                f"decode.beam_size must be between 1 and {MAX_BEAM_SIZE}, got {self.beam_size}"
            )
        if not math.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"decode.length_penalty must be >= 0, got {self.length_penalty}")
        if not 0 <= self.min_len <= self.max_len or self.max_len < 1:
            raise ValueError(
                f"decode needs 0 <= min_len <= max_len and max_len >= 1, got min_len="
                f"{self.min_len}, max_len={self.max_len}"
            )
        if self.no_repeat_ngram < 0 or self.batch_size < 1:
            raise ValueError(
                f"decode needs no_repeat_ngram >= 0 and batch_size >= 1, got "
                f"{self.no_repeat_ngram} and {self.batch_size}"
            )


@dataclass(frozen=True)
class TextExample:
    """One pair as ids: ``src``/``ext`` (``</s>`` included; ``ext`` with the extended ids),
    ``tgt`` (``<unk>`` for unknown words) and ``tgt_ext`` (copyable ones by extended id),
    without ``<s>``/``</s>``; ``oovs``: the source's out-of-vocabulary words."""

    src: list[int]
    ext: list[int]
    tgt: list[int]
    tgt_ext: list[int]
    oovs: list[str]


def encode_example(
    source: str, target: str, vocab: SummaryVocab, max_source_len: int | None = None
) -> TextExample:
    """``(source, target)`` as a :class:`TextExample`, the source cut to ``max_source_len``
    tokens when given."""
    tokens = summary_tokens(source)[:max_source_len]
    extended = vocab.extend(tokens)
    words = summary_tokens(target)
    return TextExample(
        [*extended.ids, EOS_ID],
        [*extended.ext, EOS_ID],
        vocab.ids(words),
        vocab.target_ids(words, extended.oovs),
        extended.oovs,
    )


@dataclass(frozen=True)
class SummaryBatch:
    """A padded batch: ``src``, ``src_ext`` ``(B, S)`` and ``src_lengths (B,)``; ``tgt_in``
    ``(B, T)`` (``<s> y``, unknown words as ``<unk>``), ``tgt_out`` and ``tgt_ext`` ``(B, T)``
    (``y </s>``, plain and extended ids), all padded with ``<pad>``."""

    src: Tensor
    src_ext: Tensor
    src_lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    tgt_ext: Tensor

    def to(self, device: torch.device | str) -> SummaryBatch:
        tensors = (self.src, self.src_ext, self.src_lengths, self.tgt_in, self.tgt_out,
                   self.tgt_ext)  # fmt: skip
        return SummaryBatch(*(t.to(device) for t in tensors))


def _padded(rows: Sequence[Sequence[int]]) -> Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def collate_examples(examples: Sequence[TextExample]) -> SummaryBatch:
    return SummaryBatch(
        _padded([e.src for e in examples]),
        _padded([e.ext for e in examples]),
        torch.tensor([len(e.src) for e in examples]),
        _padded([[BOS_ID, *e.tgt] for e in examples]),
        _padded([[*e.tgt, EOS_ID] for e in examples]),
        _padded([[*e.tgt_ext, EOS_ID] for e in examples]),
    )


def example_batches(
    examples: Sequence[TextExample],
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[SummaryBatch]:
    """Length-grouped batches of at most ``max_tokens`` padded tokens per side, a pure function
    of ``(seed, epoch)``; ``start`` skips the epoch's first batches (exact resume)."""
    costs = [max(len(e.src), len(e.tgt) + 1) for e in examples]
    plan = plan_by_cost(costs, max_tokens=max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
    if not 0 <= start <= len(plan):
        raise DataError(f"start must be in [0, {len(plan)}] (batches in this epoch), got {start}")
    return (collate_examples([examples[i] for i in rows]) for rows in plan[start:])


def text_loss(copying: bool, coverage_weight: float):
    """``loss_fn(model, batch) -> (summed loss, target tokens)`` for the training engine (the
    module docstring's loss)."""

    def loss_fn(model: nn.Module, batch: SummaryBatch) -> tuple[Tensor, Tensor]:
        if not copying:
            logits = model(batch.src, batch.src_lengths, batch.tgt_in).logits  # (B, T, V)
            return sequence_cross_entropy(logits, batch.tgt_out, pad_id=PAD_ID)
        out = model(batch.src, batch.src_lengths, batch.tgt_in, src_ext=batch.src_ext)
        vocab_log_probs = out.logits.float().log_softmax(dim=-1)  # (B, T, V)
        gold = gold_log_probs(vocab_log_probs, out.copy, batch.src_ext, batch.tgt_ext)  # (B, T)
        keep = (batch.tgt_out != PAD_ID).to(gold.dtype)
        loss = -(gold * keep).sum()
        if out.copy.coverage_loss is not None and coverage_weight:
            loss = loss + coverage_weight * (out.copy.coverage_loss * keep).sum()
        return loss, keep.sum()

    return loss_fn

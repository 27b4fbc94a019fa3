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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from qkv.data.errors import DataError
from qkv.data.pairs.batching import plan_by_cost
from qkv.data.pairs.summary_words import SummaryVocab, summary_tokens
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.layers.copy import gold_log_probs
from qkv.training.losses import sequence_cross_entropy

__all__ = [
    "SummaryBatch",
    "TextExample",
    "collate_examples",
    "encode_example",
    "example_batches",
    "text_loss",
]


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
    costs = np.array([max(len(e.src), len(e.tgt) + 1) for e in examples], dtype=np.int64)
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

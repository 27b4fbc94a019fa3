"""What a word reader reads: a whole passage and its question as ids of the run's word
vocabulary (:class:`~qkv.data.tokens.word_vocab.WordVocab`), one question per row.

The cloze readers and DrQA's BiLSTM reader read this way. Words become ids in the batch, not
before, so that training draws each example's unknown-word slots afresh every epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from qkv.data.pairs.batching import plan_by_cost
from qkv.data.tokens.word_vocab import WordVocab
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.tasks.encoder_inputs import collate
from qkv.tasks.reading.config import ReadingDataConfig
from qkv.tasks.reading.inputs import VOCAB_FILE, ReadingExample, Window, batch_to, gold_spans
from qkv.tasks.run_skeleton import TrainingRun


@dataclass(frozen=True)
class ReadingBatch:
    """Padded ids: ``passage (B, S)``, ``question (B, Q)``, their keep-masks; cloze:
    ``candidates (B, C)``, ``candidate_keep`` and ``answer (B,)``; spans: ``spans (B, G, 2)``
    with ``span_keep (B, G)`` (the gold answers, word positions)."""

    passage: Tensor
    passage_keep: Tensor
    question: Tensor
    question_keep: Tensor
    candidates: Tensor | None = None
    candidate_keep: Tensor | None = None
    answer: Tensor | None = None
    spans: Tensor | None = None
    span_keep: Tensor | None = None

    def to(self, device: torch.device | str) -> ReadingBatch:
        return batch_to(self, device)

    def inputs(self) -> dict[str, Tensor]:
        """The keyword arguments of a reader's ``forward``."""
        names = ["passage", "passage_keep", "question", "question_keep"]
        if self.candidates is not None:
            names += ["candidates", "candidate_keep"]
        return {name: getattr(self, name) for name in names}

    @property
    def size(self) -> int:
        return self.passage.size(0)

    def tokens(self) -> int:
        """The engine's token count: the passage and question words read."""
        return int(self.passage_keep.sum() + self.question_keep.sum())


def _pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """``(ids (B, T), keep (B, T))``, right-padded (:func:`qkv.tasks.encoder_inputs.collate`)."""
    batch = collate(rows, pad_id)
    return batch.ids, batch.keep


def collate_reading(
    examples: Sequence[ReadingExample],
    vocab: WordVocab,
    orders: Sequence[Sequence[int]] | None,
    anonymize: bool = False,
) -> ReadingBatch:
    """One batch; ``orders``: each example's slot order (training), or ``None``;
    ``anonymize``: each example's candidate words are read as unknown words (slots)."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    encoded = [
        vocab.encode_example(
            (ex.passage, ex.question, ex.candidates),
            None if orders is None else orders[i],
            {vocab.key(c) for c in ex.candidates} if anonymize else (),
        )[0]
        for i, ex in enumerate(examples)
    ]
    passage, passage_keep = _pad([e[0] for e in encoded], vocab.pad_id)
    question, question_keep = _pad([e[1] for e in encoded], vocab.pad_id)
    batch = dict(
        passage=passage, passage_keep=passage_keep, question=question, question_keep=question_keep
    )
    if examples[0].candidates:
        candidates, candidate_keep = _pad([e[2] for e in encoded], vocab.pad_id)
        answer = torch.tensor([ex.answer for ex in examples])
        batch.update(candidates=candidates, candidate_keep=candidate_keep, answer=answer)
    else:
        batch.update(gold_spans([ex.spans for ex in examples]))
    return ReadingBatch(**batch)


def reading_batches(
    examples: Sequence[ReadingExample],
    vocab: WordVocab,
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
    anonymize: bool = False,
) -> Iterator[ReadingBatch]:
    """Length-grouped batches of at most ``max_tokens`` padded passage words
    (:func:`qkv.data.pairs.batching.plan_by_cost`); with ``shuffle`` (training) each example's
    unknown-word slots are drawn afresh, from ``seed`` and ``epoch``."""
    costs = np.array([len(ex.passage) for ex in examples])
    plan = plan_by_cost(costs, max_tokens=max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
    rng = np.random.default_rng([seed, epoch, 1]) if shuffle else None
    orders = None
    if rng is not None:  # drawn for every batch of the epoch, so a resumed epoch sees the same
        orders = [[rng.permutation(vocab.slots).tolist() for _ in indices] for indices in plan]
    for number in range(start, len(plan)):
        indices = plan[number]
        yield collate_reading(
            [examples[i] for i in indices],
            vocab,
            None if orders is None else orders[number],
            anonymize,
        )


class WordReading:
    """The inputs of a word reader: the run's word vocabulary, and whether cloze candidates are
    anonymised (``data.anonymize``)."""

    def __init__(self, vocab: WordVocab, anonymize: bool = False) -> None:
        self.vocab, self.anonymize = vocab, anonymize

    @classmethod
    def prepare(
        cls, run: TrainingRun, data: ReadingDataConfig, train: Sequence[ReadingExample]
    ) -> tuple[WordReading, nn.Module]:
        """The vocabulary of ``train``'s words (made on rank 0, or read back on a resume) and
        the model of the run's family for it, both saved to the run's directory."""
        vocab = run.shared(
            make=lambda: build_vocab(data, train),
            load=lambda directory: WordVocab.load(directory / VOCAB_FILE),
            save=lambda value, directory: value.save(directory / VOCAB_FILE),
        )
        config = run.config
        values = {**with_preset(config.family, config.model), "vocab_size": len(vocab)}
        values.pop("preset", None)
        model_config = build_config(config.family, values)
        model = build_model(config.family, model_config)
        run.save(model_config, write=lambda directory: vocab.save(directory / VOCAB_FILE))
        return cls(vocab, data.anonymize), model

    @classmethod
    def load(cls, directory: Path, data: ReadingDataConfig, model_config: Any) -> WordReading:
        """The inputs of the model in ``directory``."""
        return cls(WordVocab.load(directory / VOCAB_FILE), data.anonymize)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def windows(self, examples: Sequence[ReadingExample]) -> list[Window]:
        """One window per example: its whole passage."""
        return [
            Window(i, 0, len(ex.passage), len(ex.passage), ex.spans)
            for i, ex in enumerate(examples)
        ]

    def collate(
        self, examples: Sequence[ReadingExample], windows: Sequence[Window]
    ) -> ReadingBatch:
        """The batch of ``windows``' examples (no slot shuffling: answering)."""
        return collate_reading([examples[w.example] for w in windows], self.vocab, None,
                               self.anonymize)  # fmt: skip

    def training_batches(
        self, examples: Sequence[ReadingExample], *, max_tokens: int, seed: int, **_: Any
    ) -> Callable[[int, int], Iterator[ReadingBatch]]:
        """``(epoch, start) -> batches`` for training (:func:`reading_batches`, shuffled)."""
        return lambda epoch, start: reading_batches(
            examples, self.vocab, max_tokens=max_tokens, shuffle=True, seed=seed, epoch=epoch,
            start=start, anonymize=self.anonymize,
        )  # fmt: skip


def build_vocab(data: ReadingDataConfig, train: Sequence[ReadingExample]) -> WordVocab:
    return WordVocab.build(
        (words for ex in train for words in (ex.passage, ex.question)),
        min_count=data.min_count,
        max_size=data.max_vocab,
        slots=data.unknown_slots,
        lowercase=data.lowercase,
    )

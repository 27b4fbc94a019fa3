"""What a reader reads: questions as words, their batches, and the two losses.

A cloze question (:class:`~qkv.data.cloze.ClozeQuestion`) and a span question (a SQuAD
question, :class:`~qkv.data.squad.SpanQuestion`) both become a :class:`ReadingExample`: the
passage's words, the question's, and either the candidates with the index of the answer
(cloze) or the word spans of the gold answers (spans; a SQuAD answer's characters are mapped to
the words they overlap). Words become ids in the batch, through the run's
:class:`~qkv.data.word_vocab.WordVocab`, so that training draws each example's unknown-word
slots afresh every epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from qkv.data.batching import plan_by_cost
from qkv.data.cloze import ClozeQuestion, load_cloze
from qkv.data.cloze_synthetic import synthetic_cloze
from qkv.data.errors import DataError
from qkv.data.squad import SpanQuestion, load_span_corpus
from qkv.data.word_tokens import word_spans
from qkv.data.word_vocab import WordVocab
from qkv.tasks.encoder_inputs import collate
from qkv.tasks.run_config import RunConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadingExample:
    """One question. ``candidates``/``answer``: a cloze question's candidate words and the index
    of the answer among them (``()`` and -1 for spans); ``spans``: the gold answers as
    ``(first, last)`` word positions, inclusive (``()`` for cloze); ``offsets``: each passage
    word's ``(start, end)`` characters in ``context`` and ``answers`` the gold answers as SQuAD
    gives them, ``(text, answer_start)`` (spans only)."""

    id: str
    passage: tuple[str, ...]
    question: tuple[str, ...]
    candidates: tuple[str, ...] = ()
    answer: int = -1
    spans: tuple[tuple[int, int], ...] = ()
    context: str = ""
    offsets: tuple[tuple[int, int], ...] = ()
    answers: tuple[tuple[str, int], ...] = ()

    def answer_text(self, first: int, last: int) -> str:
        """The passage's text from word ``first`` to word ``last`` (inclusive)."""
        if self.offsets:
            return self.context[self.offsets[first][0] : self.offsets[last][1]]
        return " ".join(self.passage[first : last + 1])


def cloze_example(question: ClozeQuestion) -> ReadingExample:
    return ReadingExample(
        question.source,
        tuple(question.passage),
        tuple(question.question),
        tuple(question.candidates),
        question.candidates.index(question.answer),
    )


def span_example(question: SpanQuestion) -> ReadingExample | None:
    """``question`` as words, or ``None`` when none of its answers covers a whole word."""
    offsets = word_spans(question.context)
    passage = tuple(question.context[a:b] for a, b in offsets)
    spans = []
    for text, start in question.answers:
        end = start + len(text)
        covered = [i for i, (a, b) in enumerate(offsets) if a < end and b > start]
        if covered:
            spans.append((covered[0], covered[-1]))
    if not spans and question.answers:
        return None
    return ReadingExample(
        question.id,
        passage,
        question_words(question.question),
        spans=tuple(dict.fromkeys(spans)),
        context=question.context,
        offsets=tuple(offsets),
        answers=tuple(question.answers),
    )


def question_words(text: str) -> tuple[str, ...]:
    return tuple(text[a:b] for a, b in word_spans(text))


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
        moved = {
            name: None if value is None else value.to(device)
            for name, value in self.__dict__.items()
        }
        return ReadingBatch(**moved)

    def inputs(self) -> dict[str, Tensor]:
        """The keyword arguments of a reader's ``forward``."""
        names = ["passage", "passage_keep", "question", "question_keep"]
        if self.candidates is not None:
            names += ["candidates", "candidate_keep"]
        return {name: getattr(self, name) for name in names}


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
    elif any(ex.spans for ex in examples):
        most = max(len(ex.spans) for ex in examples)
        spans = torch.zeros(len(examples), most, 2, dtype=torch.long)
        span_keep = torch.zeros(len(examples), most, dtype=torch.bool)
        for i, ex in enumerate(examples):
            if ex.spans:
                spans[i, : len(ex.spans)] = torch.tensor(ex.spans)
                span_keep[i, : len(ex.spans)] = True
        batch.update(spans=spans, span_keep=span_keep)
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
    (:func:`qkv.data.batching.plan_by_cost`); with ``shuffle`` (training) each example's
    unknown-word slots are drawn afresh, from ``seed`` and ``epoch``."""
    costs = np.array([len(ex.passage) for ex in examples])
    plan = plan_by_cost(costs, max_tokens=max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
    rng = np.random.default_rng([seed, epoch, 1]) if shuffle else None
    orders = None
    if rng is not None:  # drawn for every batch of the epoch, so a resumed epoch sees the same
        orders = [[rng.permutation(vocab.slots) for _ in indices] for indices in plan]
    for number in range(start, len(plan)):
        indices = plan[number]
        yield collate_reading(
            [examples[i] for i in indices],
            vocab,
            None if orders is None else orders[number],
            anonymize,
        )


def cloze_loss(log_probs: Tensor, answer: Tensor) -> Tensor:
    """Summed negative log-likelihood of the answers ``(B,)`` under ``log_probs (B, C)``."""
    return -log_probs.float().gather(1, answer[:, None]).sum()


def span_loss(
    start_log_probs: Tensor, end_log_probs: Tensor, spans: Tensor, span_keep: Tensor
) -> Tensor:
    """Summed negative log-likelihood of the gold answers: ``-log sum_g P_s(a_g) P_e(b_g)``
    over each question's gold spans ``spans (B, G, 2)`` (a cloze answer that occurs three times
    in the passage is three gold spans; SQuAD's several answers likewise)."""
    start = start_log_probs.float().gather(1, spans[..., 0])  # (B, G)
    end = end_log_probs.float().gather(1, spans[..., 1])
    floor = torch.finfo(start.dtype).min
    joint = (start + end).masked_fill(~span_keep, floor)
    return -torch.logsumexp(joint, dim=1).sum()


VOCAB_FILE = "vocab.json"
CLOZE_FAMILY = "cloze_reader"
SPAN_FAMILY = "span_reader"
CLOZE_CORPORA = {"cloze": load_cloze, "synthetic": synthetic_cloze}
SPAN_CORPORA = ("cloze", "synthetic", "squad")


@dataclass(frozen=True)
class ReadingDataConfig:
    """A reader's data and vocabulary.

    ``corpus``: ``cloze`` (options ``kind: entities|nouns``, ``sources: [bible, shakespeare]``,
    ``translation``, ``stride``, ``train_translations``, ``train_blanks``), ``synthetic``
    (options ``n``, ``seed``) or, for span readers, ``squad`` (options ``train``, ``test``,
    ``valid``: SQuAD v1.1 files).
    ``min_count``/``max_vocab``: the vocabulary (training words seen that often, the most
    frequent first); ``unknown_slots``: ids for one example's distinct unknown words;
    ``valid_questions``: how many validation questions pick the best weights during training
    (``None``: all); ``anonymize``: a cloze question's candidate words are read as unknown words,
    so each is a slot that means nothing outside its example (Hermann et al. 2015 anonymised
    the entities of CNN/Daily Mail so that a reader cannot answer from what it knows of a
    name, only from the passage)."""

    corpus: str = "cloze"
    options: dict[str, Any] = field(default_factory=dict)
    lowercase: bool = True
    min_count: int = 2
    max_vocab: int = 50_000
    unknown_slots: int = 64
    valid_questions: int | None = 2000
    anonymize: bool = False

    def __post_init__(self) -> None:
        if self.corpus not in SPAN_CORPORA:
            raise ValueError(
                f"data.corpus must be one of {', '.join(SPAN_CORPORA)}, got {self.corpus!r}"
            )
        for name in ("min_count", "max_vocab"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if self.unknown_slots < 0:
            raise ValueError(f"data.unknown_slots must be >= 0, got {self.unknown_slots}")
        if self.valid_questions is not None and self.valid_questions < 1:
            raise ValueError(
                f"data.valid_questions must be >= 1 or null, got {self.valid_questions}"
            )


def is_cloze(family: str) -> bool:
    return family == CLOZE_FAMILY


def check_reading_config(config: RunConfig) -> ReadingDataConfig:
    """The run's data section, refused when its family cannot read its corpus (a cloze reader
    needs candidates: the ``cloze`` or ``synthetic`` corpus)."""
    data = config.section("data", ReadingDataConfig)
    if is_cloze(config.family) and data.corpus not in CLOZE_CORPORA:
        raise DataError(
            f"a cloze reader picks among candidates: data.corpus must be "
            f"{' or '.join(CLOZE_CORPORA)}, got {data.corpus!r} (a span_reader reads it)"
        )
    return data


def load_examples(config: RunConfig) -> dict[str, list[ReadingExample]]:
    """The run's questions per split, as a reader of its family reads them."""
    data = check_reading_config(config)
    if is_cloze(config.family):
        corpus = CLOZE_CORPORA[data.corpus](**data.options)
        return {s: [cloze_example(q) for q in corpus.split(s)] for s in ("train", "valid", "test")}
    spans = load_span_corpus(data.corpus, **data.options)
    out = {}
    for split in ("train", "valid", "test"):
        examples = [span_example(q) for q in spans.split(split)]
        kept = [ex for ex in examples if ex is not None]
        if len(kept) < len(examples):
            logger.info(
                "%s: %d questions whose answers cover no whole word dropped",
                split,
                len(examples) - len(kept),
            )
        out[split] = kept
    return out


def reading_tokens(batch: ReadingBatch) -> int:
    """The engine's token count: the passage and question words read."""
    return int(batch.passage_keep.sum() + batch.question_keep.sum())

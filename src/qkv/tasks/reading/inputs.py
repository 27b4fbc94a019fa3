"""What every reader reads: questions as words, the windows a model reads them in, the two
losses, and the data section.

A cloze question (:class:`~qkv.data.reading.cloze.ClozeQuestion`) and a span question (a SQuAD
question, :class:`~qkv.data.reading.squad.SpanQuestion`) both become a :class:`ReadingExample`: the
passage's words, the question's, and either the candidates with the index of the answer
(cloze) or the word spans of the gold answers (spans; a SQuAD answer's characters are mapped to
the words they overlap).

How words reach a model is the family's (:data:`INPUT_KINDS`): as ids of the run's own word
vocabulary, one whole passage per row (:mod:`qkv.tasks.reading.words`; the cloze readers and
DrQA's BiLSTM reader), or as subwords beside the question, in windows that fit a Transformer
encoder (:mod:`qkv.tasks.reading.subwords`; the encoder span reader, e.g. a fine-tuned MiniLM).
Either way a model reads :class:`Window` s and answers in passage words.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import Tensor

from qkv.data.errors import DataError
from qkv.data.reading.cloze import ClozeCorpus, ClozeQuestion, load_cloze
from qkv.data.reading.cloze_synthetic import synthetic_cloze
from qkv.data.reading.squad import SpanQuestion, load_span_corpus
from qkv.data.tokens.words import word_spans
from qkv.tasks.reading.config import (
    CLOZE_FAMILY,
    ENCODER_SPAN_FAMILY,
    INPUT_KINDS,
    TOKENIZERS,
    ReadingDataConfig,
)
from qkv.tasks.run_config import RunConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

logger = logging.getLogger(__name__)

B = TypeVar("B", bound="DataclassInstance")


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
class Window:
    """The part of example ``example``'s passage one model row reads: ``size`` words from word
    ``offset``; ``cost``: its padded length in a batch; ``spans``: the gold spans lying whole
    in it, in window word positions. A subword window also holds its ids (``[CLS] question
    [SEP] passage words [SEP]``), the position of each question and passage word's first
    subword in them and each passage word's shape
    (:func:`~qkv.data.labelled.word_shape.word_shape`); a
    word reader's window is the whole passage and needs none."""

    example: int
    offset: int
    size: int
    cost: int
    spans: tuple[tuple[int, int], ...] = ()
    ids: tuple[int, ...] = ()
    question_first: tuple[int, ...] = ()
    passage_first: tuple[int, ...] = ()
    passage_shapes: tuple[int, ...] = ()


def batch_to(batch: B, device: torch.device | str) -> B:
    """``batch`` (a dataclass of tensors and ``None`` s) with every tensor on ``device``."""
    return dataclasses.replace(
        batch,
        **{
            f.name: None if getattr(batch, f.name) is None else getattr(batch, f.name).to(device)
            for f in dataclasses.fields(batch)
        },
    )


def gold_spans(
    rows: Sequence[Sequence[tuple[int, int]]], always: bool = False
) -> dict[str, Tensor]:
    """``{spans (B, G, 2), span_keep (B, G)}`` of each row's gold spans (``G >= 1``), or ``{}``
    when no row has one (questions to answer, not to learn from) unless ``always`` (windows,
    some of which hold no answer)."""
    if not any(rows) and not always:
        return {}
    most = max(1, max(len(row) for row in rows))
    spans = torch.zeros(len(rows), most, 2, dtype=torch.long)
    span_keep = torch.zeros(len(rows), most, dtype=torch.bool)
    for i, row in enumerate(rows):
        if row:
            spans[i, : len(row)] = torch.tensor(row)
            span_keep[i, : len(row)] = True
    return {"spans": spans, "span_keep": span_keep}


def cloze_loss(log_probs: Tensor, answer: Tensor) -> Tensor:
    """Summed negative log-likelihood of the answers ``(B,)`` under ``log_probs (B, C)``."""
    return -log_probs.float().gather(1, answer[:, None]).sum()


def span_loss(
    start_log_probs: Tensor,
    end_log_probs: Tensor,
    spans: Tensor,
    span_keep: Tensor,
    null_log_probs: Tensor | None = None,
) -> Tensor:
    """Summed negative log-likelihood of the gold answers: ``-log sum_g P_s(a_g) P_e(b_g)``
    over each question's gold spans ``spans (B, G, 2)`` (a cloze answer that occurs three times
    in the passage is three gold spans; SQuAD's several answers likewise). A row without a gold
    span is a window holding no answer: its loss is ``-null_log_probs (B,)``, which must then
    be given."""
    start = start_log_probs.float().gather(1, spans[..., 0])  # (B, G)
    end = end_log_probs.float().gather(1, spans[..., 1])
    floor = torch.finfo(start.dtype).min
    joint = (start + end).masked_fill(~span_keep, floor)
    answered = span_keep.any(dim=1)  # (B,)
    if null_log_probs is None:
        if not bool(answered.all()):
            raise ValueError(
                "a row has no gold span; only a model with a null answer (null_log_probs) can "
                "learn from it"
            )
        return -torch.logsumexp(joint, dim=1).sum()
    gold = torch.logsumexp(joint, dim=1).where(answered, null_log_probs.float())  # (B,)
    return -gold.sum()


VOCAB_FILE = "vocab.json"
# How each family reads: whole passages as word ids, or windows of subwords beside the question;
# and the data.tokenizer values each kind takes.
CLOZE_CORPORA: dict[str, Callable[..., ClozeCorpus]] = {
    "cloze": load_cloze,
    "synthetic": synthetic_cloze,
}


def is_cloze(family: str) -> bool:
    return family == CLOZE_FAMILY


def input_kind(family: str) -> str:
    """``words`` or ``subwords``: how ``family`` reads (:data:`INPUT_KINDS`)."""
    if family not in INPUT_KINDS:
        raise ValueError(f"a reader's family is one of {', '.join(INPUT_KINDS)}, got {family!r}")
    return INPUT_KINDS[family]


def check_reading_config(config: RunConfig) -> ReadingDataConfig:
    """The run's data section, refused when its family cannot read its corpus (a cloze reader
    needs candidates: the ``cloze`` or ``synthetic`` corpus)."""
    data = config.section("data", ReadingDataConfig)
    takes = TOKENIZERS[input_kind(config.family)]
    if data.tokenizer not in takes:
        raise DataError(
            f"a {config.family} reads data.tokenizer {' or '.join(takes)}, got {data.tokenizer!r}"
        )
    if config.model.get("pretrained") is not None and input_kind(config.family) != "subwords":
        raise DataError(
            f"model.pretrained names an encoder to fine-tune; a {config.family} has none (the "
            f"{ENCODER_SPAN_FAMILY} has)"
        )
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

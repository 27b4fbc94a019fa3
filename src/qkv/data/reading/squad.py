"""Extractive question answering as SQuAD v1.1 (Rajpurkar et al. 2016): a question about a
context, answered by a span of it.

- :func:`read_squad` reads the official layout strictly (``{"data": [{"title", "paragraphs":
  [{"context", "qas": [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}``);
  anything else, or an answer that is not at its ``answer_start`` in the context, is a
  :class:`~qkv.data.errors.DataError` naming the file and the first bad place. SQuAD v2.0's
  unanswerable questions (``is_impossible`` true, or no answer) are refused, not skipped: only
  v1.1 is supported, and a silently smaller test set would give scores that cannot be
  compared with anyone's.
- :func:`write_squad` writes questions back in that layout (atomically), one article, the
  questions sharing a context in one paragraph, so the official ``evaluate-v1.1.py`` reads it.
- :func:`cloze_as_spans` writes cloze questions (:mod:`qkv.data.reading.cloze`) as spans: the
  context is the passage's tokens joined by spaces, every occurrence of the answer token is a
  gold span.
- :func:`load_cloze_corpus`: the cloze corpora by name, ``"cloze"`` and ``"synthetic"``.
- :func:`load_span_corpus`: ``"cloze"`` and ``"synthetic"`` (the cloze corpora as spans) or
  ``"squad"`` (the user's files; no SQuAD file ships with qkv or exists on these machines).
"""

from __future__ import annotations

import functools
import json
import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError, decode_utf8, parse_json
from qkv.data.reading.cloze import ClozeCorpus, ClozeQuestion, load_cloze
from qkv.data.reading.cloze_synthetic import synthetic_cloze
from qkv.io import atomic_write

__all__ = [
    "CLOZE_CORPORA",
    "SPAN_CORPORA",
    "SpanCorpus",
    "SpanQuestion",
    "cloze_as_spans",
    "load_cloze_corpus",
    "load_span_corpus",
    "read_squad",
    "write_squad",
]

logger = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
VALID_PERCENT = 5  # articles of a training file held out when no valid file is given


@dataclass(frozen=True)
class SpanQuestion:
    """A question whose answers are spans of ``context``.

    Attributes:
        id: unique within its file or corpus.
        context: the text the answer is taken from.
        question: the question.
        answers: ``(text, answer_start)`` pairs, at least one;
            ``context[answer_start:answer_start + len(text)] == text`` for each (checked).
    """

    id: str
    context: str
    question: str
    answers: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", tuple((t, s) for t, s in self.answers))
        if not self.answers:
            raise DataError(f"question {self.id!r} has no answer")
        for text, start in self.answers:
            if not text.strip():
                raise DataError(f"question {self.id!r}: answer {text!r} is empty or whitespace")
            if self.context[start : start + len(text)] != text or start < 0:
                raise DataError(
                    f"question {self.id!r}: answer {text!r} is not at answer_start={start} of "
                    f"its context (found {self.context[max(start, 0) : start + len(text)]!r})"
                )


@dataclass(frozen=True)
class SpanCorpus:
    """Span questions, split; ``split_note`` says how."""

    name: str
    train: list[SpanQuestion]
    valid: list[SpanQuestion]
    test: list[SpanQuestion]
    split_note: str

    def split(self, name: str) -> list[SpanQuestion]:
        """The questions of split ``name``: ``"train"``, ``"valid"`` or ``"test"``."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, name)

    def sizes(self) -> dict[str, int]:
        """Question counts, ``{"train": n, "valid": n, "test": n}``."""
        return {s: len(getattr(self, s)) for s in SPLITS}


# --------------------------------------------------------------------- reading


def _expect(value: Any, kind: type, where: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DataError(f"{where}: {what} must be a JSON {kind.__name__}, got {value!r:.60}")
    return value


def _field(mapping: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(mapping, dict):
        raise DataError(f"{where}: expected a JSON object, got {mapping!r:.60}")
    if key not in mapping:
        raise DataError(f"{where}: no {key!r} field (SQuAD v1.1 layout)")
    return _expect(mapping[key], kind, where, repr(key))


def _read_articles(path: str | Path) -> list[tuple[str, list[SpanQuestion]]]:
    """``(title, questions)`` per article of a SQuAD v1.1 file (see :func:`read_squad`)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    document = parse_json(path, decode_utf8(path, path.read_bytes()))
    articles = _field(document, "data", list, f"{path}")
    seen: dict[str, str] = {}
    out = []
    for a, article in enumerate(articles):
        where = f"{path}: article {a}"
        title = _field(article, "title", str, where)
        where = f"{path}: article {a} ({title!r:.60})"
        questions = []
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            at = f"{where}, paragraph {p}"
            context = _field(paragraph, "context", str, at)
            for q, qa in enumerate(_field(paragraph, "qas", list, at)):
                if not isinstance(qa, dict) or "id" not in qa:
                    raise DataError(f"{at}, question {q}: no 'id' field")
                qid = _expect(qa["id"], str, f"{at}, question {q}", "'id'")
                there = f"{at}, question {qid!r}"
                if qid in seen:
                    raise DataError(f"{there}: duplicate id (first at {seen[qid]})")
                seen[qid] = f"article {a}, paragraph {p}"
                question = _field(qa, "question", str, there)
                if not question.strip():
                    raise DataError(f"{there}: the question is empty; ask one, or drop it")
                if qa.get("is_impossible"):
                    raise DataError(
                        f"{there}: an unanswerable (is_impossible) question of SQuAD v2.0; qkv "
                        "reads SQuAD v1.1 only"
                    )
                answers = []
                for n, answer in enumerate(_field(qa, "answers", list, there)):
                    text = _field(answer, "text", str, f"{there}, answer {n}")
                    start = _field(answer, "answer_start", int, f"{there}, answer {n}")
                    if not text.strip():
                        raise DataError(
                            f"{there}, answer {n}: the answer {text!r:.60} is empty or only "
                            "whitespace, which no prediction can match (SQuAD's scoring strips "
                            "it to nothing); give the span's words"
                        )
                    found = context[max(start, 0) : start + len(text)]
                    if start < 0 or found != text:
                        raise DataError(
                            f"{there}, answer {n}: {text!r:.60} is not at answer_start={start} "
                            f"of the context (found {found!r:.60})"
                        )
                    answers.append((text, start))
                if not answers:
                    raise DataError(
                        f"{there}: an empty answers list (an unanswerable SQuAD v2.0 question?); "
                        "qkv reads SQuAD v1.1 only, where every question has an answer"
                    )
                questions.append(SpanQuestion(qid, context, question, tuple(answers)))
        out.append((title, questions))
    if not seen:
        raise DataError(f"{path}: no questions")
    return out


def read_squad(path: str | Path) -> list[SpanQuestion]:
    """The questions of a SQuAD v1.1 file, in file order (module docstring).

    Raises:
        DataError: naming the file and the first bad place (article index and title,
            paragraph, question id, answer index): no such file, not UTF-8 JSON, a missing or
            mistyped field, a duplicate id, an answer not at its ``answer_start``, a SQuAD v2.0
            unanswerable question or an empty answers list, no question at all.
    """
    return [q for _, questions in _read_articles(path) for q in questions]


def write_squad(questions: Sequence[SpanQuestion], path: str | Path, *, title: str = "qkv") -> None:
    """Write ``questions`` as a SQuAD v1.1 file (``"version": "1.1"``, one article ``title``),
    questions sharing a context in one paragraph, in order of first appearance; written whole
    or not at all (:func:`qkv.io.atomic_write`).

    Raises:
        DataError: two questions with the same id.
    """
    paragraphs: dict[str, list[dict[str, Any]]] = {}
    ids = set()
    for q in questions:
        if q.id in ids:
            raise DataError(f"two questions have the id {q.id!r}")
        ids.add(q.id)
        paragraphs.setdefault(q.context, []).append({
            "id": q.id,
            "question": q.question,
            "answers": [{"text": t, "answer_start": s} for t, s in q.answers],
        })  # fmt: skip
    document = {
        "version": "1.1",
        "data": [{
            "title": title,
            "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs.items()],
        }],
    }  # fmt: skip
    atomic_write(path, lambda handle: json.dump(document, handle, ensure_ascii=False), mode="w")


# --------------------------------------------------------------------- cloze as spans


def cloze_as_spans(questions: Sequence[ClozeQuestion]) -> list[SpanQuestion]:
    """Cloze questions as span questions: context ``" ".join(passage)``, question
    ``" ".join(question)`` (the placeholder kept), gold spans every occurrence of the answer
    token in the passage (character offsets in the context), id the question's source."""
    spans = []
    for cloze in questions:
        starts, offset = [], 0
        for token in cloze.passage:
            if token == cloze.answer:
                starts.append(offset)
            offset += len(token) + 1
        spans.append(
            SpanQuestion(
                cloze.source,
                " ".join(cloze.passage),
                " ".join(cloze.question),
                tuple((cloze.answer, s) for s in starts),
            )
        )
    return spans


# --------------------------------------------------------------------- corpora


def _squad_corpus(
    train: str | Path, test: str | Path, valid: str | Path | None = None
) -> SpanCorpus:
    if valid is not None:
        parts = {"train": read_squad(train), "valid": read_squad(valid)}
        note = f"files: train {train}, valid {valid}, test {test}"
    else:
        parts = {"train": [], "valid": []}
        held = []
        for title, questions in _read_articles(train):
            held_out = zlib.crc32(title.encode()) % 100 < VALID_PERCENT
            parts["valid" if held_out else "train"].extend(questions)
            if held_out:
                held.append(title)
        if not parts["valid"] or not parts["train"]:
            raise DataError(
                f"{train}: holding out the articles with crc32(title) % 100 < {VALID_PERCENT} "
                f"leaves {len(parts['train'])} train and {len(parts['valid'])} valid questions; "
                "give a valid file"
            )
        note = (
            f"files: train {train}, test {test}; valid = the {len(held)} whole articles of the "
            f"train file with zlib.crc32(title.encode()) % 100 < {VALID_PERCENT}"
        )
    parts["test"] = read_squad(test)
    return SpanCorpus(Path(train).stem, parts["train"], parts["valid"], parts["test"], note)


def _as_spans(load: Callable[..., ClozeCorpus]) -> Callable[..., SpanCorpus]:
    """``load`` with each split written by :func:`cloze_as_spans`; its options are ``load``'s
    (the signature the registry checks, through ``functools.wraps``)."""

    @functools.wraps(load)
    def load_spans(**options: Any) -> SpanCorpus:
        corpus = load(**options)
        return SpanCorpus(
            corpus.name,
            cloze_as_spans(corpus.train),
            cloze_as_spans(corpus.valid),
            cloze_as_spans(corpus.test),
            corpus.split_note,
        )

    return load_spans


CLOZE_CORPORA: CorpusRegistry[ClozeCorpus] = CorpusRegistry(
    "cloze corpus", {"cloze": load_cloze, "synthetic": synthetic_cloze}
)
"""The cloze corpora, as questions with candidates (a cloze reader's data)."""

SPAN_CORPORA: CorpusRegistry[SpanCorpus] = CorpusRegistry(
    "span corpus",
    {**{name: _as_spans(load) for name, load in CLOZE_CORPORA.items()}, "squad": _squad_corpus},
    # The span corpora word their refusals as they always have (the tests pin these words).
    unknown_options="{kind} {name!r}: unexpected keyword argument(s) {unknown}; "
    "its options: {accepted}",
    missing_options="{kind} {name!r} needs the option(s) {missing}",
)


def load_cloze_corpus(name: str, **options: Any) -> ClozeCorpus:
    """The cloze corpus ``name``: ``"cloze"`` (:func:`~qkv.data.reading.cloze.load_cloze`) or
    ``"synthetic"`` (:func:`~qkv.data.reading.cloze_synthetic.synthetic_cloze`), with their
    options.

    Raises:
        DataError: an unknown name or option (naming the allowed), or what the loader raises.
    """
    return CLOZE_CORPORA.load(name, **options)


def load_span_corpus(name: str, **options: Any) -> SpanCorpus:
    """A span corpus by name.

    - ``"cloze"``: ``kind``, ``sources``, ``translation``, ``stride`` as
      :func:`~qkv.data.reading.cloze.load_cloze`, each split written by :func:`cloze_as_spans`;
    - ``"synthetic"``: ``n``, ``seed`` (and ``valid``, ``test``, ``length``) as
      :func:`~qkv.data.reading.cloze_synthetic.synthetic_cloze`, as spans;
    - ``"squad"``: ``train`` and ``test`` paths (e.g. ``train-v1.1.json``, ``dev-v1.1.json``),
      ``valid`` optional: without it, the train file's articles whose
      ``zlib.crc32(title.encode()) % 100 < 5`` are held out whole (about 5%).

    Raises:
        DataError: an unknown name or option (naming the allowed), or what the loader raises.
    """
    return SPAN_CORPORA.load(name, **options)

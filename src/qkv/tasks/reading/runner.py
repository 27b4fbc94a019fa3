"""A trained reader: answer questions about passages, score a split, show the attention.

    reader = Reader.load("runs/as-reader")
    reader.answer("Then XXXXX said to Moses ...", passage)   # Answer: text, probability
    reader.evaluate("test").lines()                           # accuracy, or exact match and F1

A cloze reader picks one of the candidate words (given, or by default the passage's words of
the kind it was trained on: names, or common nouns) and shows its attention over the passage;
a span reader returns the best span of at most ``max_answer_length`` words and shows its start
and end distributions. An encoder span reader reads a long passage in windows
(:mod:`qkv.tasks.reading.subwords`) and answers with the best span of any.
One text holds both parts where a command takes one text (``qkv plot-attention``, the
explorer): the question on the first line, the passage on the lines after it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from qkv.data.reading.squad import SpanQuestion
from qkv.data.reading.word_kinds import WORD_KINDS
from qkv.data.tokens.word_vocab import PLACEHOLDER, WordVocab
from qkv.data.tokens.words import word_spans
from qkv.evaluation.squad import SpanScores, squad_scores
from qkv.models.registry import build_config, build_model
from qkv.models.span_reader import SpanDecoding
from qkv.tasks.input_checks import one_text
from qkv.tasks.reading.config import ReadingDataConfig
from qkv.tasks.reading.inputs import (
    ReadingExample,
    Window,
    input_kind,
    is_cloze,
    load_examples,
    question_words,
)
from qkv.tasks.reading.scores import ReadingScores
from qkv.tasks.reading.subwords import SubwordReading
from qkv.tasks.reading.words import WordReading
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import CONFIG_FILE, WEIGHTS_FILE, check_split, load_model_run_config
from qkv.tasks.sections import PredictConfig
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.view_extras import NoExtras, checked_views
from qkv.training.checkpoint import CheckpointError, load_weights

# How each kind of reader reads (qkv.tasks.reading.inputs.INPUT_KINDS).
READING_INPUTS: dict[str, type[WordReading] | type[SubwordReading]] = {
    "words": WordReading,
    "subwords": SubwordReading,
}

# The most passage words one question may have: far beyond any passage a reader is trained on
# (20 verses are about 600 words), and what bounds the memory of one forward pass.
MAX_PASSAGE_WORDS = 20_000
INPUT_FORMAT = "the question on the first line and the passage on the lines after it"


@dataclass(frozen=True)
class Answer:
    """A reader's answer to one question.

    Attributes:
        text: the answer; probability: the model's probability of it (of the candidate, or of
            the span: ``P_start * P_end``).
        passage: the passage's words; attention: a cloze reader's attention over them (empty
            for the reader without attention); start/end: a span reader's distributions of the
            answer's first and last word; first/last: the answer's word positions (spans), or
            the positions where a cloze answer occurs.
        candidates: a cloze reader's probability of each candidate.
    """

    text: str
    probability: float
    passage: tuple[str, ...]
    attention: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    first: int = -1
    last: int = -1
    candidates: dict[str, float] = field(default_factory=dict)

    def marked(self, top: int = 5) -> str:
        """The passage with the answer in ``[[...]]`` and the ``top`` most-attended words
        followed by their weight (``word{0.31}``); for a span reader (no attention), the
        ``top`` words most probable as the answer's first or last word, followed by both
        probabilities (``word{start 0.93 end 0.02}``: two distributions over the passage,
        each summing to one, so their sum is no probability of anything)."""
        pairs = list(zip(self.start, self.end, strict=True))
        weights = self.attention or [max(pair) for pair in pairs]
        labels = [f"{{start {s:.2f} end {e:.2f}}}" for s, e in pairs] or [
            f"{{{w:.2f}}}" for w in weights
        ]
        ranked = sorted(range(len(weights)), key=lambda i: -weights[i])[:top] if weights else []
        words = []
        for i, word in enumerate(self.passage):
            if i in ranked:
                word = f"{word}{labels[i]}"
            if i == self.first:
                word = "[[" + word
            if i == self.last:
                word = word + "]]"
            words.append(word)
        return " ".join(words)

    def output(self) -> dict[str, Any]:
        return {
            "summary": f"{self.text} ({self.probability:.2f})",
            "answer": self.text,
            "probability": self.probability,
            "candidates": dict(self.candidates),
            "span": [self.first, self.last],
        }


def _source(example_id: str) -> str:
    return example_id.split(":", 1)[0]


class Reader(NoExtras):
    """A reader model with its inputs (see the module docstring)."""

    def __init__(
        self, model: nn.Module, inputs: WordReading | SubwordReading, config: RunConfig
    ) -> None:
        self.model, self.inputs, self.config = model, inputs, config
        self.cloze = is_cloze(config.family)

    @classmethod
    def load(cls, model_dir: str | Path) -> Reader:
        """The reader in ``model_dir``; errors name the file at fault."""
        directory = Path(model_dir)
        if not (directory / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
        config = load_model_run_config(directory)
        if config.task != "reading":
            raise ValueError(f"{directory} holds a {config.task} model, not a reader")
        data = config.section("data", ReadingDataConfig)
        model_config = build_config(config.family, config.model)
        inputs = READING_INPUTS[input_kind(config.family)].load(directory, data, model_config)
        if model_config.vocab_size != inputs.vocab_size:
            raise CheckpointError(
                f"{directory}: the model has {model_config.vocab_size} embedding rows but its "
                f"vocabulary {inputs.vocab_size} entries; the two files are from different runs"
            )
        model = build_model(config.family, model_config)
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model.eval(), inputs, config)

    @property
    def vocab(self) -> WordVocab:
        """A cloze reader's word vocabulary (cloze readers read words)."""
        if not isinstance(self.inputs, WordReading):
            raise TypeError(f"a {self.config.family} reads subwords; it has no word vocabulary")
        return self.inputs.vocab

    @property
    def batch_size(self) -> int:
        return self.config.section("decode", PredictConfig).batch_size

    def run(self, examples: Sequence[ReadingExample]) -> list[Answer]:
        """Answers to ``examples``: every window of each (one, for a word reader) read in
        batches of similar length; a question read in several windows gets the most probable
        answer of any (:meth:`_merge`)."""
        windows = self.inputs.windows(examples)
        order = sorted(range(len(windows)), key=lambda i: windows[i].cost)
        found: list[list[tuple[Window, Answer]]] = [[] for _ in examples]
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            for begin in range(0, len(order), self.batch_size):
                group = [windows[i] for i in order[begin : begin + self.batch_size]]
                batch = self.inputs.collate(examples, group).to(device)
                out = self.model(**batch.inputs())
                for row, window in enumerate(group):
                    ex = examples[window.example]
                    found[window.example].append(
                        (window, self._answer(ex, window, out, batch.passage_keep, row))
                    )
        return [self._merge(ex, parts) for ex, parts in zip(examples, found, strict=True)]

    def _answer(
        self, ex: ReadingExample, window: Window, out: Any, keep: Tensor, row: int
    ) -> Answer:
        length, offset = window.size, window.offset
        if self.cloze:
            probs = out.log_probs[row, : len(ex.candidates)].float().exp()
            best = int(probs.argmax())
            text = ex.candidates[best]
            key = self.vocab.key
            where = [i for i, w in enumerate(ex.passage) if key(w) == key(text)]
            attention = [] if out.attention is None else out.attention[row, :length].tolist()
            return Answer(
                text, float(probs[best]), ex.passage, attention=attention,
                first=where[0] if where else -1, last=where[0] if where else -1,
                candidates={c: float(p) for c, p in zip(ex.candidates, probs, strict=True)},
            )  # fmt: skip
        model = self.model
        assert isinstance(model, SpanDecoding)  # every reader but the cloze reader
        start, end, score = model.decode(out, keep)
        first, last = int(start[row]) + offset, int(end[row]) + offset
        return Answer(
            ex.answer_text(first, last), float(score[row].float().exp()), ex.passage,
            start=out.start_log_probs[row, :length].float().exp().tolist(),
            end=out.end_log_probs[row, :length].float().exp().tolist(), first=first, last=last,
        )  # fmt: skip

    @staticmethod
    def _merge(ex: ReadingExample, parts: list[tuple[Window, Answer]]) -> Answer:
        """One answer from the answers of ``ex``'s windows: the most probable; its start and end
        distributions over the whole passage hold, at each word, the most any window gave it
        (each window's sums to one over its own words)."""
        if len(parts) == 1 and parts[0][0].size == len(ex.passage):
            return parts[0][1]
        best = max(parts, key=lambda part: part[1].probability)[1]
        start, end = [0.0] * len(ex.passage), [0.0] * len(ex.passage)
        for window, answer in parts:
            for i in range(window.size):
                start[window.offset + i] = max(start[window.offset + i], answer.start[i])
                end[window.offset + i] = max(end[window.offset + i], answer.end[i])
        return dataclasses.replace(best, start=start, end=end)

    def score(self, examples: Sequence[ReadingExample], split: str = "valid") -> ReadingScores:
        """The scores of the model's answers to ``examples``."""
        if not examples:
            raise ValueError(f"the {split} split is empty")
        answers = self.run(examples)
        groups: dict[str, list[int]] = defaultdict(list)
        for i, ex in enumerate(examples):
            groups[_source(ex.id)].append(i)
        if self.cloze:
            right = [
                ex.candidates[ex.answer] == a.text for ex, a in zip(examples, answers, strict=True)
            ]

            def accuracy(indices: list[int]) -> dict[str, float]:
                return {
                    "accuracy": sum(right[i] for i in indices) / len(indices),
                    "questions": len(indices),
                }

            by_source = {source: accuracy(ids) for source, ids in sorted(groups.items())}
            return ReadingScores(split, len(examples), True, accuracy(list(range(len(right))))[
                "accuracy"], by_source=by_source)  # fmt: skip

        def spans(indices: list[int]) -> dict[str, float]:
            result = squad_scores(
                {examples[i].id: answers[i].text for i in indices},
                [examples[i] for i in indices],  # type: ignore[misc]  # AnsweredQuestion declares settable fields, a frozen dataclass has read-only ones; squad_scores only reads them
            )
            return {"exact_match": result.exact_match, "f1": result.f1, "questions": len(indices)}

        overall = spans(list(range(len(examples))))
        by_source = {source: spans(ids) for source, ids in sorted(groups.items())}
        return ReadingScores(
            split, len(examples), False, exact_match=overall["exact_match"], f1=overall["f1"],
            by_source=by_source,
        )  # fmt: skip

    def evaluate(self, split: str = "test", *, limit: int | None = None) -> ReadingScores:
        """Scores on ``split`` of the model's corpus (its first ``limit`` questions)."""
        check_split(split)
        return self.score(load_examples(self.config)[split][:limit], split)

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        result = self.evaluate(split, limit=limit)
        return Report(split, result.lines(), result.record(), complete=limit is None)

    def example(
        self,
        question: str,
        passage: str,
        candidates: Sequence[str] | None = None,
        *,
        name: str = "the question",
    ) -> ReadingExample:
        """One question about ``passage`` as the model reads it; a cloze reader's question
        marks the missing word with ``XXXXX`` and its candidates default to
        :meth:`default_candidates`. A span reader answers with a span of the passage and takes
        no ``candidates`` (given, they are refused rather than ignored). ``name``: how messages
        call the question (``"SQuAD question 'q7'"``)."""
        question = one_text(question, "question")
        passage = one_text(passage, "passage")
        if not self.cloze and candidates is not None:
            raise ValueError(
                "this reader answers with a span of the passage and takes no candidates (only "
                "a cloze reader chooses among them); drop the candidates (--candidates)"
            )
        if not question_words(question):
            raise ValueError(f"{name} has no words ({question[:60]!r}); ask a question")
        words = question_words(passage)
        if not words:
            raise ValueError("the passage has no words")
        if len(words) > MAX_PASSAGE_WORDS:
            raise ValueError(
                f"the passage has {len(words):,} words; a reader reads at most "
                f"{MAX_PASSAGE_WORDS:,} per question: split it"
            )
        asked = question_words(question)
        if not self.cloze:
            offsets = tuple(word_spans(passage))
            return ReadingExample("input", words, asked, context=passage, offsets=offsets)
        if asked.count(PLACEHOLDER) != 1:
            raise ValueError(
                f"a cloze reader's question marks the missing word with {PLACEHOLDER} exactly "
                f"once; got {asked.count(PLACEHOLDER)} in {question[:60]!r}"
            )
        if candidates is None:
            candidates = self.default_candidates(words)
        candidates = list(dict.fromkeys(candidates))
        keys = {self.vocab.key(w) for w in words}
        missing = [c for c in candidates if self.vocab.key(c) not in keys]
        if missing or not candidates:
            raise ValueError(
                f"every candidate must occur in the passage; {missing[:5] or 'none given'} do not"
            )
        return ReadingExample("input", words, asked, tuple(candidates), 0)

    def default_candidates(self, words: Sequence[str]) -> list[str]:
        """The distinct words of ``words`` of the kind the reader was trained on, by the rule
        that built its questions (:data:`~qkv.data.reading.word_kinds.WORD_KINDS`): entities (words
        the
        passage itself capitalises where they do not start a sentence) or common nouns (the
        POS lexicon)."""
        kind = self.config.section("data", ReadingDataConfig).options.get("kind", "entities")
        is_kind = WORD_KINDS[kind]([words])
        chosen = [w for w in words if is_kind(w)]
        found: dict[str, str] = {}
        for word in chosen:
            found.setdefault(self.vocab.key(word), word)
        if not found:
            raise ValueError(
                f"the passage has no {kind} to choose from (the kind this reader was trained "
                "on); give the candidates (--candidates)"
            )
        return list(found.values())

    def answer(
        self, question: str, passage: str, candidates: Sequence[str] | None = None
    ) -> Answer:
        """The answer to ``question`` about ``passage`` (see :meth:`example`)."""
        return self.run([self.example(question, passage, candidates)])[0]

    def answer_squad(
        self, questions: Sequence[SpanQuestion]
    ) -> tuple[list[Answer], SpanScores | None]:
        """The answer to each question of a SQuAD file, and the official exact match and F1
        when the file has answers (``None`` when none of its questions has one)."""
        if not questions:
            raise ValueError("the SQuAD file holds no questions")
        answers = self.run([
            self.example(q.question, q.context, name=f"SQuAD question {q.id!r}")
            for q in questions
        ])  # fmt: skip
        answered = [q for q in questions if q.answers]
        if not answered:
            return answers, None
        texts = {q.id: a.text for q, a in zip(questions, answers, strict=True)}
        scores = squad_scores(
            {q.id: texts[q.id] for q in answered},
            answered,  # type: ignore[arg-type]  # AnsweredQuestion declares settable fields, a frozen dataclass has read-only ones; squad_scores only reads them
        )
        return answers, scores

    @staticmethod
    def split_input(text: str) -> tuple[str, str]:
        """``(question, passage)`` of one text: the question on the first line, the passage
        on the lines after it."""
        text = one_text(text)
        question, _, passage = text.strip().partition("\n")
        if not question.strip() or not passage.strip():
            raise ValueError(f"a reader's input is {INPUT_FORMAT}")
        return question, passage

    def token_count(self, text: str) -> int:
        """The words of the question and the passage in ``text``."""
        question, passage = self.split_input(text)
        return len(question_words(question)) + len(question_words(passage))

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The answer to the question in ``item`` (:meth:`split_input`) and the reader's
        attention over the passage: a cloze reader's question-to-passage attention; a span
        reader's start and end distributions."""
        question, passage = self.split_input(item)
        answer = self.answer(question, passage)
        words = list(answer.passage)
        output = {**answer.output(), "passage": words, "question": question}
        if self.cloze:
            views: list[TokenView | ImageView] = []
            if answer.attention:
                weights = torch.tensor(answer.attention)[None, None]  # (H=1, Tq=1, S)
                views.append(TokenView("question", "question-to-passage attention",
                                       [PLACEHOLDER], words, [weights], False,
                                       ("passage", "question")))  # fmt: skip
            return Seen(output, views, "the passage")
        weights = torch.tensor([answer.start, answer.end])[None]  # (1, 2, S)
        view: TokenView | ImageView = TokenView(
            "span", "answer start and end over the passage", ["start", "end"], words, [weights],
            False, ("passage", "pointer"))  # fmt: skip
        return Seen(output, [view], "the passage")

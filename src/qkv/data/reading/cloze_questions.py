"""A cloze question and how one window of text makes it, as Hill et al. 2016 built the Children's
Book Test ("The Goldilocks Principle", section 2): a passage of :data:`PASSAGE_LINES` consecutive
lines, the next line with one word replaced by :data:`PLACEHOLDER`, and :data:`N_CANDIDATES`
candidate words of the passage to choose from. Where the lines come from, and how they are split,
is :mod:`qkv.data.reading.cloze`'s.

A question (:func:`cloze_question`): the kind's words of the 21st line that also occur in the
passage (as written, of the same kind) and only once in that line; one of them, drawn with
``random.Random(zlib.crc32(source.encode()))``, is the answer and becomes :data:`PLACEHOLDER`.
The other nine candidates are drawn with the same generator among the passage's other words of
that kind (distinct case-insensitively, each in the form first written in the passage), and
the ten are shuffled by it, so the answer's slot is uniform and every machine builds the same
questions. A window with fewer than ten such words, or no possible answer, gives no question.
:func:`cloze_questions` with ``blanks="all"`` makes one question per possible answer instead.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from qkv.data.errors import DataError

__all__ = [
    "BLANKS",
    "N_CANDIDATES",
    "PASSAGE_LINES",
    "PLACEHOLDER",
    "SPLITS",
    "ClozeCorpus",
    "ClozeQuestion",
    "cloze_question",
    "cloze_questions",
]

PLACEHOLDER = "XXXXX"
SPLITS = ("train", "valid", "test")
BLANKS = ("one", "all")
PASSAGE_LINES = 20
N_CANDIDATES = 10


@dataclass(frozen=True)
class ClozeQuestion:
    """One cloze question.

    Attributes:
        passage: the passage's tokens (:func:`~qkv.data.tokens.words.word_tokens` of each of its
            20 lines, concatenated).
        question: the 21st line's tokens, exactly one of them :data:`PLACEHOLDER`.
        answer: the removed token, as written; it occurs in ``passage``.
        candidates: ten tokens of ``passage``, distinct case-insensitively, ``answer`` among them.
        source: where the question line comes from, unique per question
            (``bible:4:Genesis:1:21``, ``shakespeare:macbeth:1234`` with the line's number in
            the work's text, ``synthetic:train:0:17``).
    """

    passage: tuple[str, ...]
    question: tuple[str, ...]
    answer: str
    candidates: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        if self.question.count(PLACEHOLDER) != 1:
            raise DataError(
                f"{self.source}: a cloze question holds {PLACEHOLDER!r} exactly once, not "
                f"{self.question.count(PLACEHOLDER)} times"
            )
        if self.answer not in self.candidates:
            raise DataError(f"{self.source}: answer {self.answer!r} not among the candidates")
        if len({c.lower() for c in self.candidates}) != len(self.candidates):
            raise DataError(f"{self.source}: candidates repeat: {self.candidates}")


@dataclass(frozen=True)
class ClozeCorpus:
    """Cloze questions, split; ``split_note`` names the held-out books and plays."""

    name: str
    kind: str
    train: list[ClozeQuestion]
    valid: list[ClozeQuestion]
    test: list[ClozeQuestion]
    split_note: str

    def split(self, name: str) -> list[ClozeQuestion]:
        """The questions of split ``name``: ``"train"``, ``"valid"`` or ``"test"``."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, name)

    def sizes(self) -> dict[str, int]:
        """Question counts, ``{"train": n, "valid": n, "test": n}``."""
        return {s: len(getattr(self, s)) for s in SPLITS}


# --------------------------------------------------------------------- questions


def cloze_question(
    passage_lines: Sequence[Sequence[str]],
    question_line: Sequence[str],
    source: str,
    is_kind: Callable[[str], bool],
) -> ClozeQuestion | None:
    """The question of one window (module docstring), or ``None`` when it has none.

    ``passage_lines`` are the passage's lines as tokens, ``question_line`` the next line's,
    ``is_kind`` tells whether a token is of the kind asked about.
    """
    questions = cloze_questions(passage_lines, question_line, source, is_kind, blanks="one")
    return questions[0] if questions else None


def cloze_questions(
    passage_lines: Sequence[Sequence[str]],
    question_line: Sequence[str],
    source: str,
    is_kind: Callable[[str], bool],
    *,
    blanks: str = "one",
) -> list[ClozeQuestion]:
    """The questions of one window: :func:`cloze_question`'s one (``blanks="one"``, CBT's
    rule), or one per possible answer of the question line (``blanks="all"``), each with
    ``#<token index>`` after ``source`` and its own candidates, drawn with a generator seeded
    by that id. An empty list when the window has no question."""
    if blanks not in BLANKS:
        raise DataError(f"blanks={blanks!r}: give 'one' (CBT's rule) or 'all'")
    passage = tuple(itertools.chain.from_iterable(passage_lines))
    forms: dict[str, str] = {}  # lower-cased -> the form first written in the passage
    written = set()
    for token in passage:
        if is_kind(token):
            written.add(token)
            forms.setdefault(token.lower(), token)
    if len(forms) < N_CANDIDATES:
        return []
    lowered = Counter(t.lower() for t in question_line)
    eligible = [
        i
        for i, token in enumerate(question_line)
        if token in written and lowered[token.lower()] == 1 and is_kind(token)
    ]
    if not eligible:
        return []
    if blanks == "one":
        rng = random.Random(zlib.crc32(source.encode()))
        draws = [(rng.choice(eligible), source, rng)]
    else:
        ids = [(i, f"{source}#{i}") for i in eligible]
        draws = [(i, id_, random.Random(zlib.crc32(id_.encode()))) for i, id_ in ids]
    questions = []
    for position, id_, rng in draws:
        answer = question_line[position]
        others = [form for lower, form in forms.items() if lower != answer.lower()]
        candidates = [answer, *rng.sample(others, N_CANDIDATES - 1)]
        rng.shuffle(candidates)
        question = (*question_line[:position], PLACEHOLDER, *question_line[position + 1 :])
        questions.append(ClozeQuestion(passage, tuple(question), answer, tuple(candidates), id_))
    return questions

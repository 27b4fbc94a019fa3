"""Parallel corpora: sentence pairs split into train/valid/test, and readers for the user's files.

Two file layouts are read, both UTF-8 (a leading byte-order mark and ``\\r\\n`` endings are
accepted):

- a TSV file, one pair per line: ``source<TAB>target``;
- two aligned text files, line ``i`` of one translating line ``i`` of the other.

Readers are strict: every problem raises :class:`~qkv.data.errors.DataError` naming the file and
line (an empty file, a line without exactly one tab, an empty side, bytes that are not UTF-8,
files of different lengths). Surrounding whitespace of each side is stripped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv.data.errors import DataError, check_field_length

__all__ = [
    "Pair",
    "ParallelCorpus",
    "load_aligned_corpus",
    "load_tsv_corpus",
    "read_aligned_files",
    "read_tsv_pairs",
    "split_pairs",
]

Pair = tuple[str, str]
"""A ``(source, target)`` sentence pair."""


@dataclass(frozen=True)
class ParallelCorpus:
    """Sentence pairs of one language pair, already split.

    Attributes:
        name: short identifier, e.g. ``"bible-4-l"`` or ``"reverse"``.
        source_lang: source language code (``"en"``) or a label (``"src"``).
        target_lang: target language code or label.
        train: ``(source, target)`` pairs to train on.
        valid: held-out pairs for model selection.
        test: held-out pairs for the final score.
        split_note: how the split was made, in words (reproducible from it).
    """

    name: str
    source_lang: str
    target_lang: str
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    split_note: str

    def split(self, name: str) -> list[Pair]:
        """The pairs of split ``name`` (``"train"``, ``"valid"`` or ``"test"``)."""
        if name not in ("train", "valid", "test"):
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, name)

    def sizes(self) -> dict[str, int]:
        """``{"train": n, "valid": n, "test": n}`` pair counts."""
        return {"train": len(self.train), "valid": len(self.valid), "test": len(self.test)}


# --------------------------------------------------------------------- reading files


def _read_lines(path: Path) -> list[str]:
    """Decode ``path`` line by line (1-based line numbers in errors); drop one final newline."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise DataError(f"{path}: file is empty")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{path}:{number}: not valid UTF-8 (byte {raw[err.start]:#04x} at column "
                f"{err.start + 1}); re-encode the file as UTF-8"
            ) from None
        check_field_length(f"{path}:{number}", line)
        lines.append(line.removesuffix("\r"))
    return lines


def read_tsv_pairs(path: str | Path) -> list[Pair]:
    """Read ``source<TAB>target`` lines.

    Raises:
        DataError: naming the file and line, for an empty file, a line without exactly one tab,
            an empty side, or bytes that are not UTF-8.
    """
    path = Path(path)
    pairs = []
    for number, line in enumerate(_read_lines(path), start=1):
        n_tabs = line.count("\t")
        if n_tabs != 1:
            raise DataError(
                f"{path}:{number}: expected exactly one tab between source and target, "
                f"found {n_tabs}: {line[:60]!r}"
            )
        source, target = (side.strip() for side in line.split("\t"))
        for side, text in (("source", source), ("target", target)):
            if not text:
                raise DataError(f"{path}:{number}: empty {side} side")
        pairs.append((source, target))
    return pairs


def read_aligned_files(src_path: str | Path, tgt_path: str | Path) -> list[Pair]:
    """Pair line ``i`` of ``src_path`` with line ``i`` of ``tgt_path``.

    Raises:
        DataError: files of different lengths (both counts named), an empty file, an empty line
            (file and line named), or bytes that are not UTF-8.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    sources, targets = _read_lines(src_path), _read_lines(tgt_path)
    if len(sources) != len(targets):
        raise DataError(
            f"aligned files differ in length: {src_path} has {len(sources)} lines but "
            f"{tgt_path} has {len(targets)} lines"
        )
    pairs = []
    for number, (source, target) in enumerate(zip(sources, targets, strict=True), start=1):
        source, target = source.strip(), target.strip()
        for path, text in ((src_path, source), (tgt_path, target)):
            if not text:
                raise DataError(f"{path}:{number}: empty line (every line needs a sentence)")
        pairs.append((source, target))
    return pairs


# --------------------------------------------------------------------- splitting


def split_pairs(
    pairs: Sequence[Pair], valid_fraction: float, test_fraction: float, seed: int = 0
) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Split pairs into ``(train, valid, test)`` deterministically for ``seed``.

    The unit of the split is a distinct *source sentence*: every pair sharing a source goes to
    the same split, so repeated sentences cannot leak from train into valid/test. The distinct
    sources are shuffled with ``numpy.random.default_rng(seed)``; the first
    ``round(valid_fraction * n_sources)`` (at least 1 when the fraction is positive) go to valid,
    the next ``round(test_fraction * n_sources)`` to test, the rest to train. Each split keeps
    the input order.

    Raises:
        DataError: fractions outside ``[0, 1)``, summing to 1 or more, or too few pairs to leave
            any for training.
    """
    for label, fraction in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= fraction < 1.0:
            raise DataError(f"{label} must be in [0, 1), got {fraction}")
    if valid_fraction + test_fraction >= 1.0:
        raise DataError(
            f"valid_fraction + test_fraction must be < 1, got {valid_fraction} + {test_fraction}"
        )
    sources = list(dict.fromkeys(source for source, _ in pairs))

    def count(fraction: float) -> int:
        return max(1, round(fraction * len(sources))) if fraction > 0 else 0

    n_valid, n_test = count(valid_fraction), count(test_fraction)
    if n_valid + n_test >= len(sources):
        raise DataError(
            f"{len(pairs)} pairs ({len(sources)} distinct sources) are too few to hold out "
            f"{n_valid} valid and {n_test} test sources and still train"
        )
    order = np.random.default_rng(seed).permutation(len(sources))
    split_of = {}
    for rank, index in enumerate(order.tolist()):
        split_of[sources[index]] = 1 if rank < n_valid else 2 if rank < n_valid + n_test else 0
    out: tuple[list[Pair], list[Pair], list[Pair]] = ([], [], [])
    for pair in pairs:
        out[split_of[pair[0]]].append((pair[0], pair[1]))
    return out


def _split_note(valid_fraction: float, test_fraction: float, seed: int) -> str:
    return (
        f"split_pairs(valid_fraction={valid_fraction}, test_fraction={test_fraction}, "
        f"seed={seed}): distinct source sentences shuffled with numpy default_rng({seed}); "
        "pairs sharing a source stay in one split"
    )


def load_tsv_corpus(
    path: str | Path,
    *,
    valid_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    source_lang: str = "src",
    target_lang: str = "tgt",
) -> ParallelCorpus:
    """A :class:`ParallelCorpus` from one TSV file, split by :func:`split_pairs`."""
    pairs = read_tsv_pairs(path)
    train, valid, test = split_pairs(pairs, valid_fraction, test_fraction, seed)
    return ParallelCorpus(
        name=Path(path).stem,
        source_lang=source_lang,
        target_lang=target_lang,
        train=train,
        valid=valid,
        test=test,
        split_note=_split_note(valid_fraction, test_fraction, seed),
    )


def load_aligned_corpus(
    src: str | Path,
    tgt: str | Path,
    *,
    valid_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    source_lang: str = "src",
    target_lang: str = "tgt",
) -> ParallelCorpus:
    """A :class:`ParallelCorpus` from two aligned files, split by :func:`split_pairs`."""
    pairs = read_aligned_files(src, tgt)
    train, valid, test = split_pairs(pairs, valid_fraction, test_fraction, seed)
    return ParallelCorpus(
        name=Path(src).stem,
        source_lang=source_lang,
        target_lang=target_lang,
        train=train,
        valid=valid,
        test=test,
        split_note=_split_note(valid_fraction, test_fraction, seed),
    )

"""User files: TSV and aligned readers (every error names file and line), splitting."""

from __future__ import annotations

import re

import pytest

from qkv.data import (
    DataError,
    ParallelCorpus,
    load_aligned_corpus,
    load_tsv_corpus,
    read_aligned_files,
    read_tsv_pairs,
    split_pairs,
)


def write(path, data: str | bytes):
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError)


def test_read_tsv_pairs(tmp_path):
    path = write(tmp_path / "a.tsv", "\ufeffHello\tBonjour\r\n  the cat \t le chat\nyes\toui")
    assert read_tsv_pairs(path) == [("Hello", "Bonjour"), ("the cat", "le chat"), ("yes", "oui")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a\tb\nno tab here\nc\td\n", r":2: expected exactly one tab.*found 0"),
        ("a\tb\nc\td\te\n", r":2: expected exactly one tab.*found 2"),
        ("a\tb\n\nc\td\n", r":2: expected exactly one tab.*found 0"),
        ("a\tb\nc\td\n \tx\n", r":3: empty source side"),
        ("a\tb\nc\t  \n", r":2: empty target side"),
        ("", r": file is empty"),
        ("\n\n", r": file is empty"),
    ],
)
def test_tsv_errors_name_file_and_line(tmp_path, content, message):
    path = write(tmp_path / "bad.tsv", content)
    with pytest.raises(DataError, match=re.escape(str(path)) + message):
        read_tsv_pairs(path)


def test_non_utf8_names_the_line(tmp_path):
    path = write(tmp_path / "latin1.tsv", b"ok\tok\n" + "café\tcoffee\n".encode("latin-1"))
    with pytest.raises(DataError, match=re.escape(str(path)) + r":2: not valid UTF-8 \(byte 0xe9"):
        read_tsv_pairs(path)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_tsv_pairs(tmp_path / "nope.tsv")


def test_read_aligned_files(tmp_path):
    src = write(tmp_path / "train.en", "Hello\nthe cat\n")
    tgt = write(tmp_path / "train.fr", "Bonjour\r\nle chat\r\n")
    assert read_aligned_files(src, tgt) == [("Hello", "Bonjour"), ("the cat", "le chat")]


def test_aligned_length_mismatch_gives_both_counts(tmp_path):
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.fr", "1\n2\n")
    with pytest.raises(DataError, match=re.escape(f"{src} has 3 lines but {tgt} has 2 lines")):
        read_aligned_files(src, tgt)


def test_aligned_empty_line_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.fr", "1\n\n3\n")
    with pytest.raises(DataError, match=re.escape(f"{tgt}:2: empty line")):
        read_aligned_files(src, tgt)


def test_aligned_empty_file_and_bad_bytes(tmp_path):
    src = write(tmp_path / "a.en", "1\n")
    empty = write(tmp_path / "a.fr", "")
    with pytest.raises(DataError, match=re.escape(f"{empty}: file is empty")):
        read_aligned_files(src, empty)
    bad = write(tmp_path / "b.fr", b"\xff\xfe\n")
    with pytest.raises(DataError, match=re.escape(f"{bad}:1: not valid UTF-8")):
        read_aligned_files(src, bad)


PAIRS = [(f"source {i}", f"cible {i}") for i in range(200)]


def test_split_pairs_is_deterministic_and_disjoint():
    train, valid, test = split_pairs(PAIRS, 0.1, 0.05, seed=3)
    assert (len(train), len(valid), len(test)) == (170, 20, 10)
    assert split_pairs(PAIRS, 0.1, 0.05, seed=3) == (train, valid, test)
    assert split_pairs(PAIRS, 0.1, 0.05, seed=4) != (train, valid, test)
    assert sorted(train + valid + test) == sorted(PAIRS)
    assert train == [p for p in PAIRS if p in set(train)]  # input order kept


def test_split_pairs_keeps_repeated_sources_together():
    pairs = [(f"s{i % 50}", f"t{i}") for i in range(500)]  # each source 10 times
    train, valid, test = split_pairs(pairs, 0.2, 0.2, seed=0)
    sources = [{s for s, _ in split} for split in (train, valid, test)]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert (len(valid), len(test)) == (100, 100)


@pytest.mark.parametrize(
    ("valid", "test", "message"),
    [(-0.1, 0.1, "valid_fraction"), (0.1, 1.0, "test_fraction"), (0.5, 0.5, "must be < 1")],
)
def test_split_pairs_rejects_bad_fractions(valid, test, message):
    with pytest.raises(DataError, match=message):
        split_pairs(PAIRS, valid, test)


def test_split_pairs_needs_enough_pairs():
    with pytest.raises(DataError, match="too few"):
        split_pairs(PAIRS[:2], 0.1, 0.1)


def test_corpus_loaders(tmp_path):
    lines = [f"word{i}\tmot{i}" for i in range(40)]
    path = write(tmp_path / "mine.tsv", "\n".join(lines))
    corpus = load_tsv_corpus(path, valid_fraction=0.1, test_fraction=0.1, seed=1)
    assert isinstance(corpus, ParallelCorpus)
    assert corpus.name == "mine" and corpus.sizes() == {"train": 32, "valid": 4, "test": 4}
    assert "seed=1" in corpus.split_note
    assert corpus.split("valid") == corpus.valid
    with pytest.raises(DataError, match="unknown split"):
        corpus.split("dev")
    src = write(tmp_path / "s.txt", "\n".join(f"word{i}" for i in range(40)))
    tgt = write(tmp_path / "t.txt", "\n".join(f"mot{i}" for i in range(40)))
    aligned = load_aligned_corpus(src, tgt, valid_fraction=0.1, test_fraction=0.1, seed=1)
    assert (aligned.train, aligned.valid, aligned.test) == (corpus.train, corpus.valid, corpus.test)

"""The dataset registry: names, options, and errors that list what is known."""

from __future__ import annotations

import pytest

from qkv.data import CORPORA, DataError, ParallelCorpus, corpus_options, load_corpus


def test_known_names():
    assert set(CORPORA) == {
        "aclsum", "bible", "copy-synthetic", "docstrings", "files", "plays-dialogue", "reverse",
        "tsv",
    }  # fmt: skip
    assert corpus_options("bible") == ["source", "target", "max_words"]


def test_unknown_name_lists_known_ones():
    with pytest.raises(
        DataError,
        match=r"unknown corpus 'wmt14'.*aclsum, bible, copy-synthetic, docstrings, files, "
        r"plays-dialogue, reverse, tsv",
    ):
        load_corpus("wmt14")


def test_unknown_and_missing_options():
    with pytest.raises(DataError, match=r"unknown option\(s\) \['colour'\].*n_train"):
        load_corpus("reverse", colour="red")
    with pytest.raises(DataError, match=r"needs option\(s\) \['path'\]"):
        load_corpus("tsv")
    with pytest.raises(DataError, match=r"needs option\(s\) \['src', 'tgt'\]"):
        load_corpus("files")


def test_reverse_defaults_and_options():
    corpus = load_corpus("reverse", n_train=20, n_valid=3, seed=5)
    assert isinstance(corpus, ParallelCorpus)
    assert corpus.sizes() == {"train": 20, "valid": 3, "test": 500}


def test_user_files(tmp_path):
    (tmp_path / "p.tsv").write_text("".join(f"a{i}\tb{i}\n" for i in range(30)))
    (tmp_path / "s.txt").write_text("".join(f"a{i}\n" for i in range(30)))
    (tmp_path / "t.txt").write_text("".join(f"b{i}\n" for i in range(30)))
    tsv = load_corpus("tsv", path=tmp_path / "p.tsv", valid_fraction=0.1, test_fraction=0.1)
    files = load_corpus(
        "files",
        src=tmp_path / "s.txt",
        tgt=tmp_path / "t.txt",
        valid_fraction=0.1,
        test_fraction=0.1,
    )
    assert tsv.sizes() == files.sizes() == {"train": 24, "valid": 3, "test": 3}
    assert tsv.train == files.train

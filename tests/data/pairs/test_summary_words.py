"""Summary words and the extended vocabulary, by hand."""

from __future__ import annotations

import pytest

from qkv.data.errors import DataError
from qkv.data.pairs.dialogue import TURN_SEPARATOR
from qkv.data.pairs.summary_words import TURN, SummaryVocab, summary_text, summary_tokens
from qkv.data.tokens.special import SPECIAL_TOKENS, UNK_ID


def test_tokens_split_identifiers_and_keep_the_turn_marker():
    code = "def getSourceLines(self, obj_name): return HTTPServer.port_2"
    assert summary_tokens(code) == [
        "def", "get", "source", "lines", "(", "self", ",", "obj", "name", ")", ":", "return",
        "http", "server", ".", "port", "2",
    ]  # fmt: skip
    assert summary_tokens("Don't  stop <turn> 3.14 now!") == [
        "don't",
        "stop",
        "<turn>",
        "3.14",
        "now",
        "!",
    ]
    assert summary_tokens("  \n") == []
    assert TURN_SEPARATOR.strip() == TURN  # the dialogue data's separator is one token here
    assert summary_text(["a", "b", "."]) == "a b ."


def test_vocabulary_by_frequency_after_the_special_tokens():
    vocab = SummaryVocab.build([["b", "a", "b"], ["c", "a", "b", "d"]], size=7, min_count=1)
    assert vocab.words == [*SPECIAL_TOKENS, "b", "a", "c"]  # ties: the first seen first
    assert len(SummaryVocab.build([["b", "a", "b"], ["c"]], size=10, min_count=2)) == 5
    assert vocab.ids(["a", "zz"]) == [5, UNK_ID]


def test_extended_ids_and_targets_by_hand():
    vocab = SummaryVocab([*SPECIAL_TOKENS, "the", "king"])  # V = 6
    read = vocab.extend(["the", "zork", "king", "quab", "zork"])
    assert read.ids == [4, UNK_ID, 5, UNK_ID, UNK_ID]
    assert read.ext == [4, 6, 5, 7, 6]  # zork -> V, quab -> V + 1, in order of first occurrence
    assert read.oovs == ["zork", "quab"]
    # A target word of the source's oovs copies; an unknown word elsewhere is <unk>.
    assert vocab.target_ids(["quab", "king", "blip"], read.oovs) == [7, 5, UNK_ID]
    assert vocab.tokens([7, 5, 6], read.oovs) == ["quab", "king", "zork"]
    with pytest.raises(DataError, match="id 8 is outside"):
        vocab.tokens([8], read.oovs)


def test_save_load_round_trip_and_refusals(tmp_path):
    vocab = SummaryVocab([*SPECIAL_TOKENS, "the", "king"])
    vocab.save(tmp_path / "vocab.json")
    assert SummaryVocab.load(tmp_path / "vocab.json").words == vocab.words
    (tmp_path / "bad.json").write_text('{"words": 3}', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json"):
        SummaryVocab.load(tmp_path / "bad.json")
    with pytest.raises(DataError, match="starts with"):
        SummaryVocab(["the", *SPECIAL_TOKENS])
    with pytest.raises(DataError, match="each word once"):
        SummaryVocab([*SPECIAL_TOKENS, "a", "a"])
    with pytest.raises(DataError, match="vocab_size must be larger"):
        SummaryVocab.build([["a"]], size=4)

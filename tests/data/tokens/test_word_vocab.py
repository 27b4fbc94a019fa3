"""The readers' word vocabulary: unknown words share per-example slots, never one ``<unk>``."""

from __future__ import annotations

import pytest

from qkv.data.errors import DataError
from qkv.data.tokens.special import PAD_ID, UNK_ID
from qkv.data.tokens.word_vocab import PLACEHOLDER, PLACEHOLDER_ID, SLOT_BASE, WordVocab


def _vocab(slots: int = 3) -> WordVocab:
    texts = [["The", "king", "said", "XXXXX"], ["the", "king", "and", "the", "queen"]]
    return WordVocab.build(texts, min_count=2, slots=slots, lowercase=True)


def test_words_seen_min_count_times_most_frequent_first():
    vocab = _vocab()
    assert vocab.tokens[SLOT_BASE + 3 :] == ["the", "king"]  # the: 3, king: 2; said once
    assert vocab.index[PLACEHOLDER] == PLACEHOLDER_ID and vocab.pad_id == PAD_ID


def test_unknown_words_get_one_slot_each_within_an_example():
    vocab = _vocab()
    (passage, question), overflow = vocab.encode_example(
        [["Moses", "and", "the", "Moses"], ["XXXXX", "Aaron", "moses"]]
    )
    moses, and_, aaron = SLOT_BASE, SLOT_BASE + 1, SLOT_BASE + 2
    assert passage == [moses, and_, vocab.index["the"], moses]
    assert question == [PLACEHOLDER_ID, aaron, moses]  # lower-cased: the same word
    assert overflow == 0


def test_slot_order_permutes_and_overflow_maps_to_unk():
    vocab = _vocab(slots=2)
    (ids,), overflow = vocab.encode_example([["a", "b", "c", "c", "a"]], order=[1, 0])
    assert ids == [SLOT_BASE + 1, SLOT_BASE, UNK_ID, UNK_ID, SLOT_BASE + 1]
    assert overflow == 1


def test_a_literal_slot_token_in_text_is_an_unknown_word():
    vocab = _vocab()
    (ids,), _ = vocab.encode_example([["<unk2>", "king"]])
    assert ids == [SLOT_BASE, vocab.index["king"]]


def test_save_and_load_round_trip(tmp_path):
    vocab = _vocab()
    vocab.save(tmp_path / "vocab.json")
    again = WordVocab.load(tmp_path / "vocab.json")
    assert again.tokens == vocab.tokens and again.lowercase and again.slots == 3


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(DataError, match="min_count"):
        WordVocab.build([["a"]], min_count=0)
    (tmp_path / "bad.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json is not a word vocabulary"):
        WordVocab.load(tmp_path / "bad.json")


def test_hidden_words_become_slots_like_unknown_ones():
    vocab = _vocab()
    (ids,), _ = vocab.encode_example([["the", "king", "the", "Moses"]], hide={"king"})
    assert ids == [vocab.index["the"], SLOT_BASE, vocab.index["the"], SLOT_BASE + 1]

"""SubwordTokenizer: special ids, exact round trips on real text, UNK, persistence, errors."""

from __future__ import annotations

import pickle

import pytest
import torch

from qkv.data import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, SubwordTokenizer
from qkv.data.errors import DataError
from tests.data.conftest import ENGLISH, FRENCH

pytest.importorskip("tokenizers")


def test_special_tokens_sit_at_ids_0_to_3(tokenizer):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert SPECIAL_TOKENS == ["<pad>", "<s>", "</s>", "<unk>"]
    assert tokenizer.pieces([0, 1, 2, 3]) == SPECIAL_TOKENS


@pytest.mark.parametrize("sentence", ENGLISH + FRENCH)
def test_round_trip_real_sentences(tokenizer, sentence):
    ids = tokenizer.encode(sentence)
    assert all(4 <= i < tokenizer.vocab_size for i in ids)  # no specials, no UNK
    assert tokenizer.decode(ids) == sentence


def test_round_trip_unseen_sentence_of_seen_characters(tokenizer):
    sentence = "Le garçon a dit : « Où est le marché ? » The park is lovely."
    ids = tokenizer.encode(sentence)
    assert UNK_ID not in ids
    assert tokenizer.decode(ids) == sentence


def test_encode_adds_no_special_tokens_and_decode_skips_them(tokenizer):
    ids = tokenizer.encode("Le chat")
    assert BOS_ID not in ids and EOS_ID not in ids
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "Le chat"
    assert tokenizer.decode(torch.tensor([BOS_ID, *ids])) == "Le chat"


def test_pieces_mark_word_starts_and_split_punctuation(tokenizer):
    pieces = tokenizer.pieces(tokenizer.encode("le chat."))
    assert pieces[0].startswith("▁") and pieces[-1] == "."
    assert "".join(pieces).replace("▁", " ").strip() == "le chat."


def test_unknown_characters_map_to_unk(tokenizer):
    ids = tokenizer.encode("chat 猫 €")
    assert ids.count(UNK_ID) == 2
    assert "<unk>" in tokenizer.pieces(ids)
    assert tokenizer.decode(ids).split() == ["chat"]


def test_text_spelling_a_special_token_is_plain_text(tokenizer):
    ids = tokenizer.encode("le <s> chat </s>")
    assert BOS_ID not in ids and EOS_ID not in ids


def test_encode_batch_equals_encode(tokenizer, texts):
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(t) for t in texts]


def test_vocabulary_never_exceeds_vocab_size(texts):
    small = SubwordTokenizer.train(texts, vocab_size=20)  # fewer ids than distinct characters
    assert small.vocab_size <= 20
    assert UNK_ID in small.encode("Où est la gare ?")  # rare characters fall back to UNK


def test_save_load_gives_identical_ids(tokenizer, texts, tmp_path):
    path = tokenizer.save(tmp_path / "tok")
    assert path == tmp_path / "tok" / "tokenizer.json"
    for loaded in (SubwordTokenizer.load(tmp_path / "tok"), SubwordTokenizer.load(path)):
        assert loaded.vocab_size == tokenizer.vocab_size
        assert loaded.encode_batch(texts) == tokenizer.encode_batch(texts)
        assert loaded.encode("chat 猫") == tokenizer.encode("chat 猫")
        assert UNK_ID in loaded.encode("chat 猫")
    assert tokenizer.save(tmp_path / "x.json") == tmp_path / "x.json"
    again = SubwordTokenizer.from_json(tokenizer.to_json())
    assert again.encode_batch(texts) == tokenizer.encode_batch(texts)


def test_pickles_for_data_loader_workers(tokenizer, texts):
    clone = pickle.loads(pickle.dumps(tokenizer))
    assert clone.encode_batch(texts) == tokenizer.encode_batch(texts)


@pytest.mark.parametrize("vocab_size", [0, 4])
def test_vocab_size_too_small_is_named(texts, vocab_size):
    with pytest.raises(ValueError, match=f"vocab_size={vocab_size}"):
        SubwordTokenizer.train(texts, vocab_size=vocab_size)


@pytest.mark.parametrize("empty", [[], ["", "   "]])
def test_empty_training_text_raises(empty):
    with pytest.raises(ValueError, match="empty text"):
        SubwordTokenizer.train(empty, vocab_size=100)


def test_training_reads_a_generator_once(texts):
    tok = SubwordTokenizer.train((t for t in texts), vocab_size=120)
    assert tok.decode(tok.encode(texts[0])) == texts[0]


def test_decode_rejects_ids_outside_vocabulary(tokenizer):
    with pytest.raises(ValueError, match=f"id {tokenizer.vocab_size} at position 1"):
        tokenizer.decode([5, tokenizer.vocab_size])


def test_load_errors_name_the_path(tmp_path):
    with pytest.raises(DataError, match="no tokenizer file"):
        SubwordTokenizer.load(tmp_path)
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="not a valid tokenizer"):
        SubwordTokenizer.load(bad)

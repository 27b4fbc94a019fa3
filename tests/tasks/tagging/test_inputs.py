"""A tagger's data path and head: word shapes, batches, word scores, the softmax and CRF losses
(each against an independent computation), the decoding (argmax, valid BIO for a softmax, the
CRF's Viterbi), the casing feature's checks, the output formats, and ``train.head_lr``'s
parameter groups."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from qkv.data.labelled.word_shape import SHAPES, word_shape
from qkv.layers.crf import bio_transitions
from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.tagger import SequenceTagger, SequenceTaggerConfig
from qkv.tasks.tagging.inputs import (
    TaggingExample,
    collate_tagging,
    decode_tags,
    tagging_loss,
    token_shapes,
    word_scores,
)
from qkv.tasks.tagging.output import render_tagged
from qkv.training.optimiser import parameter_groups

pytestmark = pytest.mark.usefixtures("one_thread")

TAGS = ["B-PER", "I-PER", "B-LOC", "I-LOC", "O"]


@pytest.mark.parametrize(
    ("word", "shape"),
    [("apple", "lower"), ("Apple", "title"), ("I", "title"), ("NASA", "upper"),
     ("iPhone", "mixed"), ("McDonald", "mixed"), ("2016", "digits"), ("3.5", "digits"),
     ("A380", "alphanumeric"), ("5th", "alphanumeric"), ("!!", "punctuation"),
     ("@paulwalk", "mention"), ("#NYC", "hashtag"), ("http://t.co/x", "link"),
     ("www.example.com", "link"), ("@", "punctuation"), ("é", "lower"), ("Élodie", "title")],
)  # fmt: skip
def test_word_shapes(word, shape):
    assert SHAPES[word_shape(word)] == shape


def test_token_shapes_give_every_subword_its_words_shape_and_the_specials_none():
    # [CLS] New York ##er [SEP]: "Yorker" is two subwords, both title case.
    assert token_shapes(["new", "Yorker"], [1, 2], 5) == [0, 1, 2, 2, 0]
    with pytest.raises(ValueError, match="non-empty"):
        word_shape("")


def _model(crf: bool, casing_dim: int = 0, seed: int = 0) -> SequenceTagger:
    torch.manual_seed(seed)
    text = TextEncoderConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=1, d_ff=32,
                             dropout=0.0, max_len=32)  # fmt: skip
    config = SequenceTaggerConfig(text, num_tags=len(TAGS), crf=crf, casing_dim=casing_dim,
                                  num_shapes=len(SHAPES) if casing_dim else 0)  # fmt: skip
    return SequenceTagger(config).eval()


def _examples() -> list[TaggingExample]:
    # Word i starts at first[i]; the second example is shorter (padding in both W and T).
    return [
        TaggingExample([1, 5, 6, 7, 8, 9, 2], [1, 2, 4, 5], [0, 1, 4, 2], [0, 2, 2, 2, 1, 2, 0]),
        TaggingExample([1, 11, 12, 2], [1, 2], [4, 2], [0, 1, 2, 0]),
    ]


def test_collate_pads_words_and_ids_and_word_scores_gather_the_first_subwords():
    batch = collate_tagging(_examples(), pad_id=0)
    assert batch.ids.tolist() == [[1, 5, 6, 7, 8, 9, 2], [1, 11, 12, 2, 0, 0, 0]]
    assert batch.words.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.first.tolist() == [[1, 2, 4, 5], [1, 2, 0, 0]]
    assert batch.tags.tolist() == [[0, 1, 4, 2], [4, 2, 0, 0]]
    assert batch.shapes.tolist()[1] == [0, 1, 2, 0, 0, 0, 0]
    model = _model(crf=False, casing_dim=4)
    logits = model(batch.ids, keep=batch.keep, shapes=batch.shapes).logits
    scores = word_scores(model, batch)
    assert torch.equal(scores[0], logits[0, [1, 2, 4, 5]])
    assert torch.equal(scores[1, :2], logits[1, [1, 2]])


def test_the_softmax_loss_is_the_cross_entropy_at_first_subwords_with_smoothing():
    batch = collate_tagging([TaggingExample(e.ids, e.first, e.tags) for e in _examples()], 0)
    model = _model(crf=False)
    logits = model(batch.ids, keep=batch.keep).logits
    labels = torch.full(batch.ids.shape, -100)
    for row, example in enumerate(_examples()):
        labels[row, example.first] = torch.tensor(example.tags)
    expected = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100,
                               reduction="sum", label_smoothing=0.1)  # fmt: skip
    loss, words = tagging_loss(0.1)(model, batch)
    assert int(words) == 6
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_the_crf_loss_is_the_brute_force_negative_log_likelihood():
    batch = collate_tagging([TaggingExample(e.ids, e.first, e.tags) for e in _examples()], 0)
    model = _model(crf=True)
    with torch.no_grad():  # non-zero transitions, so the CRF differs from the softmax
        model.crf.transitions.copy_(torch.randn(len(TAGS), len(TAGS)))
        model.crf.start.copy_(torch.randn(len(TAGS)))
        model.crf.end.copy_(torch.randn(len(TAGS)))
    scores = word_scores(model, batch).double()
    trans, start, end = (p.double() for p in (model.crf.transitions, model.crf.start,
                                                model.crf.end))  # fmt: skip

    def path_score(row: int, path: tuple[int, ...]) -> torch.Tensor:
        total = start[path[0]] + end[path[-1]]
        total = total + sum(scores[row, i, t] for i, t in enumerate(path))
        return total + sum(trans[a, b] for a, b in itertools.pairwise(path))

    expected = 0.0
    for row, example in enumerate(_examples()):
        n = len(example.first)
        every = torch.stack([path_score(row, p)
                             for p in itertools.product(range(len(TAGS)), repeat=n)])  # fmt: skip
        expected += (torch.logsumexp(every, 0) - path_score(row, tuple(example.tags))).item()
    loss, _ = tagging_loss()(model, batch)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_decoding_argmax_valid_bio_and_crf_viterbi():
    keep = torch.ones(1, 3, dtype=torch.bool)
    scores = torch.tensor([[[0.0, 3.0, 0.0, 0.0, 1.0],  # I-PER first: invalid
                            [0.0, 3.0, 0.0, 0.0, 1.0],
                            [0.0, 0.0, 0.0, 0.0, 2.0]]])  # fmt: skip
    softmax = _model(crf=False)
    assert decode_tags(softmax, scores, keep, None) == [[1, 1, 4]]  # the argmax, as POS tags
    rules = bio_transitions(TAGS)
    assert decode_tags(softmax, scores, keep, rules) == [[0, 1, 4]]  # B-PER I-PER O
    crf = _model(crf=True)
    assert decode_tags(crf, scores, keep, rules) == [[0, 1, 4]]
    assert decode_tags(crf, scores, keep, None) == [[1, 1, 4]]


def test_the_casing_feature_is_checked_and_changes_the_scores():
    model = _model(crf=False, casing_dim=4)
    ids = torch.tensor([[1, 5, 6, 2]])
    with pytest.raises(ValueError, match=r"reads word shapes \(casing_dim=4\): pass shapes"):
        model(ids)
    lower = model(ids, shapes=torch.tensor([[0, 1, 1, 0]])).logits
    title = model(ids, shapes=torch.tensor([[0, 2, 2, 0]])).logits
    assert not torch.allclose(lower[0, 1], title[0, 1])
    assert torch.equal(lower[0, 0], title[0, 0])  # [CLS]'s shape did not change
    with pytest.raises(ValueError, match="no casing feature"):
        _model(crf=False)(ids, shapes=torch.zeros_like(ids))


@pytest.mark.parametrize(
    ("values", "message"),
    [({"crf": 1}, "crf must be true or false"), ({"casing_dim": -1}, "casing_dim must be"),
     ({"casing_dim": 8}, "needs num_shapes >= 2")],
)  # fmt: skip
def test_bad_head_settings_are_named(values, message):
    text = TextEncoderConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    with pytest.raises(ValueError, match=message):
        SequenceTaggerConfig(text, num_tags=3, **values)


def test_output_formats():
    tagged = [("Paul", "B-PER"), ("Smith", "I-PER"), ("visits", "O"), ("Oslo", "B-LOC")]
    text = "Paul Smith visits Oslo"
    assert render_tagged([text], [tagged], "spans", entity_tags=True) == [
        "[Paul Smith](PER) visits [Oslo](LOC)"
    ]
    assert render_tagged([text], [tagged], "conll", entity_tags=True) == [
        "Paul\tB-PER", "Smith\tI-PER", "visits\tO", "Oslo\tB-LOC", ""
    ]  # fmt: skip
    row = json.loads(render_tagged([text], [tagged], "json", entity_tags=True)[0])
    assert row["entities"] == [
        {"type": "PER", "start": 0, "end": 2, "text": "Paul Smith"},
        {"type": "LOC", "start": 3, "end": 4, "text": "Oslo"},
    ]
    pos = [("Paul", "NNP"), ("runs", "VBZ")]
    assert render_tagged(["Paul runs"], [pos], "words", entity_tags=False) == ["Paul/NNP runs/VBZ"]
    assert json.loads(render_tagged(["x"], [pos], "json", entity_tags=False)[0]) == [
        ["Paul", "NNP"], ["runs", "VBZ"]
    ]  # fmt: skip
    with pytest.raises(ValueError, match="prints words, conll, json"):
        render_tagged(["x"], [pos], "spans", entity_tags=False)


def test_head_lr_puts_the_parameters_outside_the_encoder_in_their_own_groups():
    model = _model(crf=True, casing_dim=4)
    plain = parameter_groups(model, 0.01)
    assert len(plain) == 2 and all("lr" not in g for g in plain)
    groups = parameter_groups(model, 0.01, head_lr=0.5)
    head = {id(p) for g in groups if g.get("lr") == 0.5 for p in g["params"]}
    outside = {id(p) for name, p in model.named_parameters() if not name.startswith("encoder.")}
    assert head == outside and id(model.crf.transitions) in head
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    with pytest.raises(ValueError, match=r"has no encoder: remove train\.head_lr"):
        parameter_groups(nn.Linear(2, 2), 0.0, head_lr=0.1)

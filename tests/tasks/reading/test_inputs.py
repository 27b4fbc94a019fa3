"""A reader's inputs: SQuAD answers mapped to words, batches, and the two losses against
references computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.data.reading.squad import SpanQuestion
from qkv.data.tokens.word_vocab import PLACEHOLDER_ID, WordVocab
from qkv.tasks.reading.inputs import ReadingExample, cloze_loss, span_example, span_loss
from qkv.tasks.reading.words import collate_reading, reading_batches


def test_a_squad_answer_becomes_the_words_it_covers():
    context = "Denver Broncos won Super Bowl 50, in 2016."
    question = SpanQuestion("q1", context, "Who won?", (("Denver Broncos", 0), ("Bowl 50", 25)))
    ex = span_example(question)
    assert ex.passage[:3] == ("Denver", "Broncos", "won")
    assert ex.spans == ((0, 1), (4, 5))
    assert ex.answer_text(4, 5) == "Bowl 50" and ex.answer_text(0, 1) == "Denver Broncos"
    assert ex.question == ("Who", "won", "?")


def test_an_answer_inside_a_word_covers_that_word_and_none_is_dropped():
    context = "The footballers left."
    inside = SpanQuestion("q", context, "who?", (("ball", 8),))
    assert span_example(inside).spans == ((1, 1),)


def test_collate_pads_and_keeps():
    vocab = WordVocab.build([["a", "b", "c"]] * 2, min_count=1, slots=2)
    examples = [
        ReadingExample("x:1", ("a", "b", "c"), ("XXXXX", "a"), ("a", "c"), 1),
        ReadingExample("x:2", ("b",), ("XXXXX",), ("b",), 0),
    ]
    batch = collate_reading(examples, vocab, None)
    assert batch.passage.shape == (2, 3) and batch.passage_keep.tolist() == [
        [True, True, True],
        [True, False, False],
    ]
    assert batch.question[0, 0] == PLACEHOLDER_ID and batch.candidate_keep[1].tolist() == [
        True,
        False,
    ]
    assert batch.answer.tolist() == [1, 0]
    assert batch.candidates[0].tolist() == [vocab.index["a"], vocab.index["c"]]


def test_training_batches_cover_every_example_once_and_resume_the_same():
    vocab = WordVocab.build([["a"]], min_count=1, slots=4)
    examples = [
        ReadingExample(f"x:{i}", ("a",) * (1 + i % 5) + (f"n{i}",), ("XXXXX",), ("a",), 0)
        for i in range(40)
    ]
    batches = list(reading_batches(examples, vocab, max_tokens=12, shuffle=True, epoch=3))
    assert sum(b.passage.size(0) for b in batches) == 40
    again = list(reading_batches(examples, vocab, max_tokens=12, shuffle=True, epoch=3, start=2))
    assert all(torch.equal(a.passage, b.passage) for a, b in zip(batches[2:], again, strict=True))


def test_cloze_loss_is_the_summed_negative_log_likelihood():
    log_probs = torch.log_softmax(torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]]), -1)
    expected = -(log_probs[0, 1] + log_probs[1, 2])
    assert torch.allclose(cloze_loss(log_probs, torch.tensor([1, 2])), expected)


def test_span_loss_marginalises_over_the_gold_spans():
    torch.manual_seed(0)
    start = torch.log_softmax(torch.randn(2, 6, dtype=torch.float64), -1)
    end = torch.log_softmax(torch.randn(2, 6, dtype=torch.float64), -1)
    spans = torch.tensor([[[0, 1], [3, 3]], [[2, 4], [0, 0]]])
    keep = torch.tensor([[True, True], [True, False]])
    p = start.exp(), end.exp()
    expected = -(
        math.log(p[0][0, 0] * p[1][0, 1] + p[0][0, 3] * p[1][0, 3])
        + math.log(p[0][1, 2] * p[1][1, 4])
    )
    assert span_loss(start, end, spans, keep).item() == pytest.approx(expected, rel=1e-5)

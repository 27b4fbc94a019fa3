"""An encoder span reader's inputs: passage windows against brute force (every short answer lies
whole in some window), each word's first subword found in the ids, gold spans re-based,
questions too long refused, batches padded, and a question's windows merged into one answer."""

from __future__ import annotations

import itertools
import random

import pytest

from qkv.data.errors import DataError
from qkv.data.labelled.word_shape import word_shape
from qkv.data.tokens.subword import SubwordTokenizer
from qkv.tasks.encoder_inputs import TextInputs
from qkv.tasks.reading.config import ReadingDataConfig
from qkv.tasks.reading.inputs import ReadingExample, Window
from qkv.tasks.reading.runner import Answer, Reader
from qkv.tasks.reading.subwords import SubwordReading
from qkv.tasks.windows import overlapping_windows

TEXTS = [
    "the key opens the old garden door",
    "Alice walked near the river with Boris and Clara",
    "then the small dog slept under the green tree",
] * 20


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> TextInputs:
    bpe = SubwordTokenizer.train(TEXTS, 80)
    return TextInputs.from_json(bpe.to_json(), kind="bpe", max_len=24, source="test BPE")


def test_windows_cover_the_passage_and_hold_every_short_run_whole():
    rng = random.Random(0)
    for _ in range(300):
        sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 40))]
        budget = rng.randint(4, 16)
        overlap = rng.randint(0, budget // 2)
        windows = overlapping_windows(sizes, budget, overlap)
        assert windows[0][0] == 0 and windows[-1][1] == len(sizes)
        for (a, b), (c, d) in itertools.pairwise(windows):
            assert a < c <= b < d  # in order, touching or overlapping, always moving on
            assert sum(sizes[c:b]) <= overlap
        for a, b in windows:
            assert sum(sizes[a:b]) <= budget
        for first in range(len(sizes)):  # brute force: every run of <= overlap subwords
            for last in range(first, len(sizes)):
                if sum(sizes[first : last + 1]) <= overlap:
                    assert any(a <= first and last < b for a, b in windows), (sizes, first, last)


def test_a_word_longer_than_the_budget_is_a_window_of_its_own():
    assert overlapping_windows([2, 9, 2], 4, 1) == [(0, 1), (1, 2), (2, 3)]
    with pytest.raises(ValueError, match="budget"):
        overlapping_windows([1], 0, 0)


def example(words: str, spans=((3, 4),)) -> ReadingExample:
    return ReadingExample("t:1", tuple(words.split()), ("who", "walked", "?"), spans=spans)


def test_each_window_holds_the_question_and_its_words_first_subwords(inputs):
    ex = example("then Alice walked near the river with Boris and Clara under the green tree")
    reading = SubwordReading(inputs, overlap=4)
    windows = reading.windows([ex])
    assert len(windows) > 1
    question_ids = [i for piece in inputs.subwords(ex.question) for i in piece]
    covered = set()
    for w in windows:
        assert w.cost == len(w.ids) <= inputs.max_len
        assert w.ids[0] == inputs.cls_id and w.ids[-1] == inputs.sep_id
        assert list(w.ids[1 : 1 + len(question_ids)]) == question_ids
        assert w.ids[1 + len(question_ids)] == inputs.sep_id
        words = ex.passage[w.offset : w.offset + w.size]
        for word, first in zip(words, w.passage_first, strict=True):
            assert w.ids[first] == inputs.subwords([word])[0][0]
        assert w.passage_shapes == tuple(word_shape(word) for word in words)
        for word, first in zip(ex.question, w.question_first, strict=True):
            assert w.ids[first] == inputs.subwords([word])[0][0]
        covered.update(range(w.offset, w.offset + w.size))
        # the gold span (words 3-4) is re-based into each window holding it whole
        expected = (
            ((3 - w.offset, 4 - w.offset),) if w.offset <= 3 and w.offset + w.size > 4 else ()
        )
        assert w.spans == expected
    assert covered == set(range(len(ex.passage)))
    assert any(w.spans for w in windows) and not all(w.spans for w in windows)

    assert reading.collate([ex], windows).passage_shapes is None
    batch = SubwordReading(inputs, overlap=4, casing=True).collate([ex], windows)
    assert batch.inputs()["passage_shapes"].tolist()[0][: windows[0].size] == list(
        windows[0].passage_shapes
    )
    assert batch.ids.shape == (len(windows), max(w.cost for w in windows))
    assert batch.keep.sum() == sum(w.cost for w in windows) == batch.tokens()
    assert batch.spans.shape[1] == 1 and batch.span_keep.sum() == sum(
        bool(w.spans) for w in windows
    )
    assert batch.passage_keep.sum(1).tolist() == [w.size for w in windows]


def test_a_question_that_leaves_no_room_for_the_passage_is_refused(inputs):
    long = ReadingExample("t:9", ("Alice",), tuple(["the", "old", "garden", "door"] * 4))
    with pytest.raises(DataError, match=r"t:9.*shorten it or raise data\.max_len"):
        SubwordReading(inputs, overlap=2).windows([long])


def test_the_window_overlap_is_at_most_a_quarter_of_max_len():
    assert ReadingDataConfig(max_len=64, window_overlap=16).window_overlap == 16
    with pytest.raises(ValueError, match="window_overlap"):
        ReadingDataConfig(max_len=64, window_overlap=17)
    with pytest.raises(ValueError, match=r"data\.tokenizer"):
        ReadingDataConfig(tokenizer="wordpiece")


def test_windows_merge_into_the_most_probable_answer_over_the_whole_passage():
    ex = example("a b c d e f")
    first = Answer("b", 0.3, ex.passage, start=[0.1, 0.6, 0.1, 0.1], end=[0.1, 0.5, 0.2, 0.1],
                   first=1, last=1)  # fmt: skip
    second = Answer("e", 0.4, ex.passage, start=[0.3, 0.1, 0.6, 0.0], end=[0.1, 0.2, 0.7, 0.0],
                    first=4, last=4)  # fmt: skip
    merged = Reader._merge(ex, [(Window(0, 0, 4, 0), first), (Window(0, 2, 4, 0), second)])
    assert (merged.text, merged.first, merged.probability) == ("e", 4, 0.4)
    assert merged.start == [0.1, 0.6, 0.3, 0.1, 0.6, 0.0]  # each word: the most any window gave
    assert merged.end == [0.1, 0.5, 0.2, 0.2, 0.7, 0.0]

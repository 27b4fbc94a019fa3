"""The attention readout of a cloze reader, against hand-computed values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from qkv.tasks.reading.attention_readout import attention_readout


def question(passage: str, candidates: str, answer: int):
    return SimpleNamespace(passage=tuple(passage.split()), candidates=tuple(candidates.split()),
                           answer=answer)  # fmt: skip


def test_the_readout_sums_the_attention_over_each_candidates_occurrences_by_hand():
    questions = [
        question("Ann met Bob and Ann", "Bob Ann", 0),  # Bob 0.5 against Ann 0.1 + 0.1
        question("bob saw ANN", "Ann Bob", 0),  # Ann 0.2 against Bob 0.7 (case-folded)
    ]
    answers = [
        SimpleNamespace(text="Ann", attention=[0.1, 0.2, 0.5, 0.1, 0.1]),  # reader wrong
        SimpleNamespace(text="ann", attention=[0.7, 0.1, 0.2]),  # reader right
    ]
    out = attention_readout(questions, answers, str.lower)
    assert out.questions == 2
    assert out.readout_accuracy == 0.5  # right on the first, wrong on the second
    assert out.reader_accuracy == 0.5  # wrong on the first, right on the second
    assert out.answer_mass == pytest.approx((0.5 + 0.2) / 2)
    assert out.max_weight == pytest.approx((0.5 + 0.7) / 2)
    first = -(3 * 0.1 * math.log(0.1) + 0.2 * math.log(0.2) + 0.5 * math.log(0.5)) / math.log(5)
    second = -(0.7 * math.log(0.7) + 0.1 * math.log(0.1) + 0.2 * math.log(0.2)) / math.log(3)
    assert out.entropy == pytest.approx((first + second) / 2)


def test_uniform_attention_has_entropy_one_and_one_hot_zero():
    q = question("a b c d", "a b", 1)
    uniform = attention_readout([q], [SimpleNamespace(text="a", attention=[0.25] * 4)], str)
    assert uniform.entropy == pytest.approx(1.0)
    one_hot = attention_readout([q], [SimpleNamespace(text="b", attention=[0, 1.0, 0, 0])], str)
    assert (one_hot.entropy, one_hot.readout_accuracy, one_hot.answer_mass) == (0.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([], "need one answer per question and at least one: 1 questions, 0 answers"),
        ([SimpleNamespace(text="a", attention=[])], "has 0 attention weights for a passage of 2 "
                                                    "words: pass a reader that attends"),
    ],
)  # fmt: skip
def test_a_reader_without_attention_or_a_missing_answer_is_refused(answers, message):
    with pytest.raises(ValueError, match=message):
        attention_readout([question("a b", "a b", 0)], answers, str)

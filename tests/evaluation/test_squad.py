"""The SQuAD v1.1 metric: hand-computed cases that follow the official evaluate-v1.1.py
(normalisation order, articles only as whole words, punctuation inside numbers, F1 over token
multisets, the best of several gold answers) and how missing or stray predictions are treated."""

from __future__ import annotations

import pytest

from qkv.data.reading.squad import SpanQuestion
from qkv.evaluation.squad import (
    SpanScores,
    exact_match,
    metric_max_over_ground_truths,
    normalize_answer,
    squad_scores,
    token_f1,
)


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Theater", "theater"),  # "the" removed as a word, kept inside "theater"
        ("an Another apple", "another apple"),
        ("1,000 dollars!", "1000 dollars"),  # punctuation inside numbers removed
        ("  A  cat's   toy ", "cats toy"),
        ("the-end", "theend"),  # punctuation removed before articles: no word "the" left
        ("a.m.", "am"),
        ("The", ""),
        ("Don't (ever)", "dont ever"),
    ],
)
def test_normalize_answer_by_hand(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_after_normalisation():
    assert exact_match("The Eiffel tower.", "eiffel  Tower")
    assert not exact_match("Eiffel", "Eiffel Tower")


def test_f1_by_hand():
    # prediction tokens: big red dog; gold: red dog -> P = 2/3, R = 1, F1 = 0.8
    assert token_f1("a big red dog", "the red dog") == pytest.approx(0.8)
    # repeated tokens count as often as the smaller count: pred "the" dropped -> [cat, cat, cat],
    # gold [cat, cat, sat]: overlap 2, P = 2/3, R = 2/3, F1 = 2/3
    assert token_f1("cat cat cat", "cat cat sat") == pytest.approx(2 / 3)
    assert token_f1("dog", "cat") == 0.0
    # a prediction that normalises to nothing scores 0 (no overlap), even against itself
    assert token_f1("the", "the") == 0.0
    assert exact_match("the", "a")  # both normalise to "": exact match says equal


def test_max_over_ground_truths():
    golds = ["Denver Broncos", "the Broncos", "Broncos"]
    assert metric_max_over_ground_truths(exact_match, "Broncos", golds) == 1.0
    assert metric_max_over_ground_truths(token_f1, "Denver", golds) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="at least one gold"):
        metric_max_over_ground_truths(token_f1, "x", [])


def question(qid: str, *answers: str) -> SpanQuestion:
    context = " ".join(answers) + " filler"
    spans, start = [], 0
    for text in answers:
        spans.append((text, start))
        start += len(text) + 1
    return SpanQuestion(qid, context, "q?", tuple(spans))


def test_squad_scores_average_the_best_over_golds_and_count_missing_as_zero():
    questions = [
        question("q1", "Denver Broncos", "Broncos"),
        question("q2", "red dog"),
        question("q3", "Paris"),
    ]
    scores = squad_scores({"q1": "the Broncos", "q2": "big red dog"}, questions)
    assert scores == SpanScores(exact_match=1 / 3, f1=(1 + 0.8 + 0) / 3, questions=3, answered=2)
    assert any("unanswered   1" in line for line in scores.lines())
    assert scores.record()["questions"] == 3


def test_squad_scores_refuse_stray_ids_no_predictions_and_no_questions():
    questions = [question("q1", "a b")]
    with pytest.raises(ValueError, match=r"no question's, e\.g\. \['zz'\]"):
        squad_scores({"q1": "b", "zz": "x"}, questions)
    with pytest.raises(ValueError, match="none of the 1 questions has a prediction"):
        squad_scores({}, questions)
    with pytest.raises(ValueError, match="no questions"):
        squad_scores({}, [])

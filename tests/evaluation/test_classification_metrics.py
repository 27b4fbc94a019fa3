"""Classification and tagging metrics equal scikit-learn's, on random labels and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.evaluation import (
    accuracy,
    confusion_matrix,
    macro_f1,
    per_label_scores,
    token_accuracy,
)

sklearn_metrics = pytest.importorskip("sklearn.metrics")

pytestmark = pytest.mark.usefixtures("one_thread")

# gold:  a a a b b c ; predicted: a a b b c c
GOLD = ["a", "a", "a", "b", "b", "c"]
PRED = ["a", "a", "b", "b", "c", "c"]


def test_a_hand_computed_case():
    # a: tp 2, fp 0, fn 1 -> P 1, R 2/3, F1 0.8; b: tp 1, fp 1, fn 1 -> 1/2 each;
    # c: tp 1, fp 1, fn 0 -> P 1/2, R 1, F1 2/3.
    scores = per_label_scores(GOLD, PRED)
    assert list(scores) == ["a", "b", "c"]
    got = [[s.precision, s.recall, s.f1, s.support] for s in scores.values()]
    np.testing.assert_allclose(got, [[1, 2 / 3, 0.8, 3], [0.5, 0.5, 0.5, 2], [0.5, 1, 2 / 3, 1]])
    assert accuracy(GOLD, PRED) == pytest.approx(4 / 6)
    assert macro_f1(GOLD, PRED) == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    # a listed label that never occurs counts with F1 0; a listed subset averages over itself
    assert macro_f1(GOLD, PRED, labels=["a", "b", "c", "d"]) == pytest.approx(
        (0.8 + 0.5 + 2 / 3) / 4
    )
    assert macro_f1(GOLD, PRED, labels=["c", "a"]) == pytest.approx((0.8 + 2 / 3) / 2)
    assert confusion_matrix(GOLD, PRED, ["a", "b", "c"]).tolist() == [
        [2, 1, 0],
        [0, 1, 1],
        [0, 0, 1],
    ]


def test_equal_to_scikit_learn_on_random_labels():
    rng = np.random.default_rng(0)
    for trial in range(150):
        n_labels = int(rng.integers(1, 6))
        n = int(rng.integers(1, 40))
        names = [f"L{i}" for i in range(n_labels)]
        gold = [names[i] for i in rng.integers(0, n_labels, n)]
        # biased predictions: often right, sometimes a label absent from gold
        pred = [g if rng.random() < 0.5 else f"L{rng.integers(0, n_labels + 1)}" for g in gold]
        everything = sorted(set(gold) | set(pred) | {"never"})
        subset = everything[: max(1, len(everything) // 2)]
        assert accuracy(gold, pred) == pytest.approx(sklearn_metrics.accuracy_score(gold, pred))
        for labels in (None, everything, subset):
            expected = sklearn_metrics.f1_score(
                gold, pred, labels=labels, average="macro", zero_division=0
            )
            assert macro_f1(gold, pred, labels) == pytest.approx(expected), (trial, labels)
        p, r, f, s = sklearn_metrics.precision_recall_fscore_support(
            gold, pred, labels=everything, average=None, zero_division=0
        )
        ours = per_label_scores(gold, pred, everything)
        assert list(ours) == everything
        got = np.array([[x.precision, x.recall, x.f1, x.support] for x in ours.values()])
        np.testing.assert_allclose(got, np.stack([p, r, f, s], axis=1), atol=1e-12)
        np.testing.assert_array_equal(
            confusion_matrix(gold, pred, everything),
            sklearn_metrics.confusion_matrix(gold, pred, labels=everything),
        )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from("ABC")), max_size=6),
        min_size=1,
        max_size=6,
    )
)
def test_token_accuracy_is_accuracy_over_all_tokens(sentences):
    gold = [[g for g, _ in s] for s in sentences]
    pred = [[p for _, p in s] for s in sentences]
    flat_gold = [t for s in gold for t in s]
    if not flat_gold:
        with pytest.raises(ValueError, match="no tokens"):
            token_accuracy(gold, pred)
        return
    flat_pred = [t for s in pred for t in s]
    assert token_accuracy(gold, pred) == pytest.approx(
        sklearn_metrics.accuracy_score(flat_gold, flat_pred)
    )


def test_token_accuracy_by_hand():
    gold = [["DT", "NN"], ["PRP", "VBZ", "."]]
    pred = [["DT", "VB"], ["PRP", "VBZ", "."]]
    assert token_accuracy(gold, pred) == pytest.approx(4 / 5)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="no labels to score"):
        accuracy([], [])
    with pytest.raises(ValueError, match="no labels to score"):
        macro_f1([], [])
    with pytest.raises(ValueError, match="3 gold labels but 2 predicted"):
        macro_f1(["a", "b", "a"], ["a", "b"])
    with pytest.raises(ValueError, match="labels is empty"):
        macro_f1(["a"], ["a"], labels=[])
    with pytest.raises(ValueError, match="labels repeat"):
        per_label_scores(["a"], ["a"], labels=["a", "a"])
    with pytest.raises(ValueError, match="predicted label 'z' at position 1 is not in labels"):
        confusion_matrix(["a", "b"], ["a", "z"], ["a", "b"])
    with pytest.raises(ValueError, match="sentence 1: 2 gold tags but 1 predicted"):
        token_accuracy([["A"], ["A", "B"]], [["A"], ["A"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        token_accuracy([["A"], ["B"]], [["A"]])
    with pytest.raises(ValueError, match="no tokens"):
        token_accuracy([], [])

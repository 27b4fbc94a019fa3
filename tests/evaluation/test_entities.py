"""Entity metrics equal seqeval's default mode (entities, micro and per-type precision, recall,
F1 and support) on random tag sequences, invalid BIO and sentences without entities included,
and hand-computed cases; the bootstrap interval equals a slow loop over the same draws, holds
the point F1, repeats for a seed and narrows with more sentences."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from qkv.evaluation.entities import (
    Entity,
    EntityScores,
    bootstrap_f1,
    entities,
    entity_scores,
)

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-geo-loc", "I-geo-loc"]

# Sentence 0: a boundary error (PER) and a type error (LOC predicted ORG); sentence 1: two
# correct entities; sentence 2: an invalid I- opens a predicted LOC; sentence 3: no entities.
GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC"],
    ["B-LOC", "O", "B-PER"],
    ["O", "O"],
    ["O"],
]
PRED = [
    ["B-PER", "O", "O", "B-ORG"],
    ["B-LOC", "O", "B-PER"],
    ["I-LOC", "O"],
    ["O"],
]


def test_a_hand_computed_case():
    # gold 4 (LOC 2, PER 2); predicted 5 (LOC 2, ORG 1, PER 2); correct 2 (LOC 1, PER 1)
    report = entity_scores(GOLD, PRED)
    assert report.sentences == 4
    assert report.micro == EntityScores(2 / 5, 2 / 4, 4 / 9, support=4, predicted=5, correct=2)
    assert list(report.per_type) == ["LOC", "ORG", "PER"]
    assert report.per_type["LOC"] == EntityScores(0.5, 0.5, 0.5, 2, 2, 1)
    assert report.per_type["ORG"] == EntityScores(0.0, 0.0, 0.0, 0, 1, 0)
    assert report.per_type["PER"] == EntityScores(0.5, 0.5, 0.5, 2, 2, 1)


def test_entities_follow_conlleval():
    assert entities(["B-PER", "I-PER", "O", "B-LOC"]) == [
        Entity("PER", 0, 2),
        Entity("LOC", 3, 4),
    ]
    # an I- after O, at the start or after another type opens an entity; B- always does
    assert entities(["I-LOC", "I-LOC", "I-PER", "O", "I-PER", "B-PER", "I-PER"]) == [
        Entity("LOC", 0, 2),
        Entity("PER", 2, 3),
        Entity("PER", 4, 5),
        Entity("PER", 5, 7),
    ]
    assert entities(["B-geo-loc", "I-geo-loc"]) == [Entity("geo-loc", 0, 2)]
    assert entities([]) == [] and entities(["O", "O"]) == []


def test_entities_are_matched_within_sentences_only():
    report = entity_scores([["B-PER"], ["O"]], [["O"], ["B-PER"]])
    assert (report.micro.correct, report.micro.predicted, report.micro.support) == (0, 1, 1)


def test_no_entities_anywhere_scores_zero():
    report = entity_scores([["O", "O"], []], [["O", "O"], []])
    assert report.micro == EntityScores(0.0, 0.0, 0.0, 0, 0, 0)
    assert report.per_type == {}
    assert bootstrap_f1([["O"]], [["O"]], resamples=10) == (0.0, 0.0)


def _random_corpus(rng: np.random.Generator) -> tuple[list[list[str]], list[list[str]]]:
    """Gold tags, often invalid, and predictions that copy each tag with probability 1/2."""
    gold, pred = [], []
    for _ in range(int(rng.integers(1, 8))):
        g = [TAGS[i] for i in rng.integers(0, len(TAGS), int(rng.integers(0, 10)))]
        gold.append(g)
        pred.append([t if rng.random() < 0.5 else TAGS[rng.integers(0, len(TAGS))] for t in g])
    return gold, pred


def test_equal_to_seqeval_on_random_tags():
    rng = np.random.default_rng(0)
    for _ in range(250):
        gold, pred = _random_corpus(rng)
        for sentence in gold + pred:
            reference = [(t, start, end + 1) for t, start, end in get_entities(sentence)]
            assert [(e.type, e.start, e.end) for e in entities(sentence)] == reference, sentence
        report = entity_scores(gold, pred)
        micro = [report.micro.precision, report.micro.recall, report.micro.f1]
        expected = [
            seqeval_metrics.precision_score(gold, pred, zero_division=0),
            seqeval_metrics.recall_score(gold, pred, zero_division=0),
            seqeval_metrics.f1_score(gold, pred, zero_division=0),
        ]
        np.testing.assert_allclose(micro, expected, atol=1e-12, err_msg=str((gold, pred)))
        if not report.per_type:  # seqeval's report needs an entity
            continue
        table = seqeval_metrics.classification_report(gold, pred, output_dict=True, zero_division=0)
        types = {k: v for k, v in table.items() if not k.endswith(" avg")}
        assert list(report.per_type) == sorted(types)
        for name, scores in report.per_type.items():
            ref = types[name]
            np.testing.assert_allclose(
                [scores.precision, scores.recall, scores.f1, scores.support],
                [ref["precision"], ref["recall"], ref["f1-score"], ref["support"]],
                atol=1e-12,
            )
        assert report.micro.support == table["micro avg"]["support"]


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match=r"sentence 1: 2 gold tags but 1 predicted tags"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted sentences"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="no sentences"):
        entity_scores([], [])
    with pytest.raises(ValueError, match=r"position 1: 'E-PER' is not a BIO tag.*convert_tags"):
        entities(["B-PER", "E-PER"])
    with pytest.raises(ValueError, match="resamples=0"):
        bootstrap_f1(GOLD, PRED, resamples=0)
    with pytest.raises(ValueError, match=r"level=1\.5"):
        bootstrap_f1(GOLD, PRED, level=1.5)


def test_lines_and_record():
    report = entity_scores(GOLD, PRED)
    lines = report.lines()
    assert lines[0].split() == ["type", "precision", "recall", "F1", "support", "predicted"]
    assert [line.split()[0] for line in lines[1:]] == ["LOC", "ORG", "PER", "micro"]
    assert lines[-1].split()[1:] == ["0.4000", "0.5000", "0.4444", "4", "5"]
    assert all(re.match(r"^\s*\w+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+", line) for line in lines[1:])
    assert len({len(line) for line in lines}) == 1  # aligned columns
    record = json.loads(json.dumps(report.record()))
    assert record["f1"] == pytest.approx(4 / 9) and record["sentences"] == 4
    assert record["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 0, "predicted": 1, "correct": 0}  # fmt: skip


def _tagged_corpus(n: int, seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """``n`` sentences of one to three entities; each predicted entity right with prob. 0.7."""
    rng = np.random.default_rng(seed)
    gold, pred = [], []
    for _ in range(n):
        g, p = [], []
        for _ in range(int(rng.integers(1, 4))):
            type_ = ["PER", "LOC"][rng.integers(0, 2)]
            right = rng.random() < 0.7
            g += ["O", f"B-{type_}", f"I-{type_}"]
            p += ["O", f"B-{type_}", f"I-{type_}" if right else "O"]
        gold.append(g)
        pred.append(p)
    return gold, pred


def test_the_bootstrap_holds_the_point_f1_and_repeats_for_a_seed():
    gold, pred = _tagged_corpus(120, seed=1)
    f1 = entity_scores(gold, pred).micro.f1
    low, high = bootstrap_f1(gold, pred, seed=3)
    assert low < f1 < high
    assert bootstrap_f1(gold, pred, seed=3) == (low, high)
    assert bootstrap_f1(gold, pred, seed=4) != (low, high)
    narrow = bootstrap_f1(gold, pred, seed=3, level=0.5)
    assert low < narrow[0] < f1 < narrow[1] < high


def test_the_bootstrap_narrows_with_more_sentences():
    gold, pred = _tagged_corpus(60, seed=2)
    low, high = bootstrap_f1(gold, pred, seed=0)
    low4, high4 = bootstrap_f1(gold * 4, pred * 4, seed=0)
    assert high4 - low4 < 0.7 * (high - low)  # about half: the width goes as 1 / sqrt(n)


def test_the_bootstrap_equals_a_slow_loop_over_the_same_draws():
    gold, pred = _tagged_corpus(7, seed=5)
    gold[3], pred[3] = ["O", "I-PER"], ["O", "O"]  # a sentence with no predicted entity
    resamples, seed, level = 50, 11, 0.9
    draws = np.random.default_rng(seed).integers(0, 7, size=(resamples, 7), dtype=np.int32)
    f1s = [entity_scores([gold[i] for i in row], [pred[i] for i in row]).micro.f1 for row in draws]
    expected = np.quantile(f1s, [0.05, 0.95])
    got = bootstrap_f1(gold, pred, resamples=resamples, seed=seed, level=level)
    np.testing.assert_allclose(got, expected, rtol=1e-12)

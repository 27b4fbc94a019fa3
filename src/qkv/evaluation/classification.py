"""Classification and tagging metrics: accuracy, per-label precision/recall/F1, macro F1, the
confusion matrix, and token accuracy over tag sequences.

Per label ``c`` with ``tp`` (gold ``c``, predicted ``c``), ``fp`` (predicted ``c``, gold not)
and ``fn`` (gold ``c``, predicted not): precision ``tp / (tp + fp)``, recall ``tp / (tp + fn)``,
F1 ``2 tp / (2 tp + fp + fn)`` (the harmonic mean of the two), each 0 when its denominator is 0.
Macro F1 is the unweighted mean of the per-label F1 over ``labels``; by default the labels that
occur in ``gold`` or ``predicted``, so a label that is never predicted nor present counts (with
F1 0) only when the caller lists it. This is scikit-learn's
``f1_score(gold, predicted, average="macro", labels=labels, zero_division=0)``; as there, a
listed subset of labels averages over that subset only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "LabelScores",
    "accuracy",
    "confusion_matrix",
    "macro_f1",
    "per_label_scores",
    "token_accuracy",
]


@dataclass(frozen=True)
class LabelScores:
    """Scores of one label; ``support`` is its number of gold occurrences."""

    precision: float
    recall: float
    f1: float
    support: int


def _check(gold: Sequence[Hashable], predicted: Sequence[Hashable]) -> None:
    if len(gold) != len(predicted):
        raise ValueError(
            f"{len(gold)} gold labels but {len(predicted)} predicted labels; they must pair up"
        )
    if not len(gold):
        raise ValueError("no labels to score")


def _labels(
    gold: Sequence[Hashable], predicted: Sequence[Hashable], labels: Sequence[Hashable] | None
) -> list[Hashable]:
    if labels is None:
        return sorted(set(gold) | set(predicted))  # type: ignore[type-var]  # labels sort (str, int); Hashable cannot say so
    labels = list(labels)
    if not labels:
        raise ValueError("labels is empty; give at least one label, or None for all")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels repeat: {labels}")
    return labels


def accuracy(gold: Sequence[Hashable], predicted: Sequence[Hashable]) -> float:
    """The share of positions where ``predicted`` equals ``gold``.

    Raises:
        ValueError: the sequences differ in length, or are empty.
    """
    _check(gold, predicted)
    return sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)


def per_label_scores(
    gold: Sequence[Hashable],
    predicted: Sequence[Hashable],
    labels: Sequence[Hashable] | None = None,
) -> dict[Hashable, LabelScores]:
    """``{label: LabelScores}`` for ``labels`` (default: every label in gold or predicted).

    Raises:
        ValueError: the sequences differ in length, are empty, or ``labels`` is empty or repeats.
    """
    _check(gold, predicted)
    labels = _labels(gold, predicted, labels)
    pairs = Counter(zip(gold, predicted, strict=True))
    gold_counts, predicted_counts = Counter(gold), Counter(predicted)
    scores = {}
    for label in labels:
        tp = pairs[(label, label)]
        fp = predicted_counts[label] - tp
        fn = gold_counts[label] - tp
        scores[label] = LabelScores(
            precision=tp / (tp + fp) if tp + fp else 0.0,
            recall=tp / (tp + fn) if tp + fn else 0.0,
            f1=2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
            support=gold_counts[label],
        )
    return scores


def macro_f1(
    gold: Sequence[Hashable],
    predicted: Sequence[Hashable],
    labels: Sequence[Hashable] | None = None,
) -> float:
    """The mean over ``labels`` of the per-label F1 (the convention is in the module doc).

    Raises:
        ValueError: as :func:`per_label_scores`.
    """
    scores = per_label_scores(gold, predicted, labels)
    return sum(s.f1 for s in scores.values()) / len(scores)


def confusion_matrix(
    gold: Sequence[Hashable], predicted: Sequence[Hashable], labels: Sequence[Hashable]
) -> np.ndarray:
    """Counts ``(L, L)``: row ``i`` = gold ``labels[i]``, column ``j`` = predicted ``labels[j]``.

    The layout of scikit-learn's ``confusion_matrix(gold, predicted, labels=labels)``; unlike it,
    a gold or predicted label missing from ``labels`` is an error, so the counts always sum to
    the number of examples.

    Raises:
        ValueError: the sequences differ in length or are empty, ``labels`` is empty or repeats,
            or a label is not in ``labels`` (named, with its position).
    """
    _check(gold, predicted)
    labels = _labels(gold, predicted, labels)
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)  # (L, L)
    for position, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        for side, label in (("gold", g), ("predicted", p)):
            if label not in index:
                raise ValueError(
                    f"{side} label {label!r} at position {position} is not in labels {labels}"
                )
        matrix[index[g], index[p]] += 1
    return matrix


def token_accuracy(
    gold_sentences: Sequence[Sequence[Hashable]],
    predicted_sentences: Sequence[Sequence[Hashable]],
) -> float:
    """The share of tokens, over all sentences, whose predicted tag equals the gold tag.

    Raises:
        ValueError: different numbers of sentences, a sentence whose predicted tags differ in
            length from its gold tags (its index named), or no tokens at all.
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(
            f"{len(gold_sentences)} gold sentences but {len(predicted_sentences)} predicted "
            "sentences; they must pair up"
        )
    correct = total = 0
    for i, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences, strict=True)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"sentence {i}: {len(gold)} gold tags but {len(predicted)} predicted tags"
            )
        correct += sum(g == p for g, p in zip(gold, predicted, strict=True))
        total += len(gold)
    if not total:
        raise ValueError("no tokens to score")
    return correct / total

"""The SQuAD v1.1 metric (Rajpurkar et al. 2016), as the official ``evaluate-v1.1.py`` computes it:
exact match and token F1 of a predicted answer string against each gold answer, the best over a
question's gold answers, averaged over questions.

Answers are compared after :func:`normalize_answer`, in the official script's order: lower
case, drop every character of :data:`string.punctuation` (so ``1,000`` becomes ``1000``),
replace the whole words ``a``, ``an``, ``the`` by spaces (``theater`` keeps its ``the``), then
collapse whitespace. F1 counts the overlap of the two multisets of normalised tokens (a token
repeated in both counts as often as the smaller count); no overlap gives 0, so does an answer
that normalises to nothing against a non-empty gold. Unlike the official script, which prints a
message and counts a question without prediction as 0, :func:`squad_scores` refuses
predictions for unknown ids and raises when no question has a prediction; a partly missing set
still counts the missing ones as 0. Scores are fractions in [0, 1], not percentages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "SpanScores",
    "exact_match",
    "metric_max_over_ground_truths",
    "normalize_answer",
    "squad_scores",
    "token_f1",
]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed (in that order)."""
    text = text.lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, ground_truth: str) -> bool:
    """Whether the two strings are equal after :func:`normalize_answer`."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def token_f1(prediction: str, ground_truth: str) -> float:
    """F1 of the normalised tokens' multisets: 2PR / (P + R); 0 when they share no token."""
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(ground_truth).split()
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def metric_max_over_ground_truths(
    metric: Callable[[str, str], float], prediction: str, ground_truths: Sequence[str]
) -> float:
    """The best ``metric(prediction, gold)`` over the gold answers."""
    if not ground_truths:
        raise ValueError("a question needs at least one gold answer")
    return max(float(metric(prediction, gold)) for gold in ground_truths)


class AnsweredQuestion(Protocol):
    """What scoring needs of a question (:class:`qkv.data.reading.squad.SpanQuestion` has it)."""

    id: str
    answers: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class SpanScores:
    """Exact match and F1 (fractions in [0, 1]) over ``questions`` questions, of which
    ``answered`` had a prediction."""

    exact_match: float
    f1: float
    questions: int
    answered: int = 0

    def lines(self) -> list[str]:
        """Printable lines, scores as percentages as SQuAD reports them."""
        lines = [
            f"exact match  {100 * self.exact_match:6.2f}",
            f"F1           {100 * self.f1:6.2f}",
            f"questions    {self.questions}",
        ]
        if self.answered != self.questions:
            lines.append(f"unanswered   {self.questions - self.answered} (counted as 0)")
        return lines

    def record(self) -> dict[str, float | int]:
        """The scores as a JSON-ready dictionary (fractions)."""
        return {
            "exact_match": self.exact_match,
            "f1": self.f1,
            "questions": self.questions,
            "answered": self.answered,
        }


def squad_scores(
    predictions: Mapping[str, str], questions: Sequence[AnsweredQuestion]
) -> SpanScores:
    """Mean over ``questions`` of the best exact match and F1 of ``predictions[id]`` over the
    question's gold answers; a question without prediction counts 0.

    Raises:
        ValueError: no questions, a prediction for an id that is not a question's (naming up
            to five), or no prediction for any question.
    """
    if not questions:
        raise ValueError("no questions to score")
    ids = {q.id for q in questions}
    unknown = sorted(set(predictions) - ids)
    if unknown:
        raise ValueError(
            f"{len(unknown)} prediction(s) for ids that are no question's, e.g. {unknown[:5]}"
        )
    em = f1 = 0.0
    answered = 0
    for question in questions:
        if question.id not in predictions:
            continue
        answered += 1
        golds = [text for text, _ in question.answers]
        prediction = predictions[question.id]
        em += metric_max_over_ground_truths(exact_match, prediction, golds)
        f1 += metric_max_over_ground_truths(token_f1, prediction, golds)
    if answered == 0:
        raise ValueError(
            f"none of the {len(questions)} questions has a prediction (first id "
            f"{questions[0].id!r}); are the predictions for another file?"
        )
    return SpanScores(em / len(questions), f1 / len(questions), len(questions), answered)

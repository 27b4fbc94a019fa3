"""How much of a cloze reader's answer its attention holds: the attention mass on each candidate's
occurrences, read off the way the Attention Sum Reader reads its answer (Kadlec et al. 2016,
eq. 3), beside what the reader itself answered.

A reader that matches a read vector against the candidates (the Stanford and Attentive Readers)
can answer right with an attention that never finds the answer (by the candidates' frequency, for
one), or find it and still answer wrong; these numbers tell the two apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["AttentionReadout", "attention_readout"]


class _Question(Protocol):
    passage: tuple[str, ...]
    candidates: tuple[str, ...]
    answer: int


class _Answer(Protocol):
    text: str
    attention: list[float]


@dataclass(frozen=True)
class AttentionReadout:
    """Means over the questions: ``readout_accuracy``, how often the candidate with the most
    attention mass on its occurrences is the answer; ``answer_mass``, the attention mass on the
    answer's occurrences; ``max_weight``, the largest weight of the passage; ``entropy``, the
    attention's entropy divided by ``log`` of the passage length (1: uniform; 0: one word);
    ``reader_accuracy``, how often the reader's own answer is right."""

    questions: int
    readout_accuracy: float
    answer_mass: float
    max_weight: float
    entropy: float
    reader_accuracy: float


def attention_readout(
    questions: Sequence[_Question], answers: Sequence[_Answer], key: Callable[[str], str]
) -> AttentionReadout:
    """The :class:`AttentionReadout` of ``answers`` (a cloze reader's, with attention over each
    passage) to ``questions``; ``key`` maps a word to what makes two words equal (the
    vocabulary's, e.g. lower case). A tie in mass goes to the first candidate.

    Raises:
        ValueError: no questions, a count mismatch, or an answer without attention (a reader
            without attention) or of another length than its passage.
    """
    if not questions or len(questions) != len(answers):
        raise ValueError(
            f"need one answer per question and at least one: {len(questions)} questions, "
            f"{len(answers)} answers"
        )
    right = own = 0
    mass_on_answer = top = entropy = 0.0
    for number, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        weights = answer.attention
        if len(weights) != len(question.passage) or len(weights) < 2:
            raise ValueError(
                f"answer {number} has {len(weights)} attention weights for a passage of "
                f"{len(question.passage)} words: pass a reader that attends (not no_attention)"
            )
        mass = dict.fromkeys((key(c) for c in question.candidates), 0.0)
        for word, weight in zip(question.passage, weights, strict=True):
            if key(word) in mass:
                mass[key(word)] += weight
        gold = key(question.candidates[question.answer])
        right += max(mass, key=mass.__getitem__) == gold  # the first of equal masses
        own += key(answer.text) == gold
        mass_on_answer += mass[gold]
        top += max(weights)
        entropy += -sum(w * math.log(w) for w in weights if w > 0) / math.log(len(weights))
    n = len(questions)
    return AttentionReadout(n, right / n, mass_on_answer / n, top / n, entropy / n, own / n)

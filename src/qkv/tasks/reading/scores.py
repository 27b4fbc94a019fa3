"""A reader's scores on a split: accuracy for cloze questions, SQuAD's exact match and F1 for
spans, overall and per source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReadingScores"]


@dataclass(frozen=True)
class ReadingScores:
    """A reader's scores on some questions: ``accuracy`` (cloze) or ``exact_match`` and ``f1``
    (spans, SQuAD's metric), overall and per source (``bible``, ``shakespeare``...: the id's
    first field)."""

    split: str
    questions: int
    cloze: bool
    accuracy: float = 0.0
    exact_match: float = 0.0
    f1: float = 0.0
    by_source: dict[str, dict[str, float]] = field(default_factory=dict)

    def metrics(self, prefix: str) -> dict[str, float]:
        if self.cloze:
            return {f"{prefix}_accuracy": self.accuracy}
        return {f"{prefix}_exact_match": self.exact_match, f"{prefix}_f1": self.f1}

    def lines(self) -> list[str]:
        def scores(values: dict[str, float]) -> str:
            if self.cloze:
                return f"accuracy {values['accuracy']:.4f}"
            return f"exact match {100 * values['exact_match']:.2f}  F1 {100 * values['f1']:.2f}"

        lines = [f"{self.split}: {self.questions:,} questions", scores(self.__dict__)]
        if len(self.by_source) > 1:
            for source, values in self.by_source.items():
                lines.append(f"  {source:<12} {scores(values)}  (n={int(values['questions'])})")
        return lines

    def record(self) -> dict[str, Any]:
        keys = ("accuracy",) if self.cloze else ("exact_match", "f1")
        return {
            "questions": self.questions,
            **{key: getattr(self, key) for key in keys},
            "by_source": self.by_source,
        }

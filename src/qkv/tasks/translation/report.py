"""How a translation model did on one split
(:meth:`~qkv.tasks.translation.runner.Translator.evaluate`): BLEU, chrF, exact match and BLEU by
source length, with the lines ``qkv evaluate`` prints (the first translations, then short ones)
and what ``results.json`` keeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qkv.evaluation.bleu import BucketScore, CorpusScores


@dataclass(frozen=True)
class EvaluationReport:
    split: str
    scores: CorpusScores
    buckets: list[BucketScore]
    examples: list[tuple[str, str, str]]  # (source, hypothesis, reference)
    beam_size: int
    exact_match: float  # fraction of hypotheses identical to their reference

    def lines(self, examples: int = 5) -> list[str]:
        """What ``qkv evaluate`` prints: the scores, then ``examples`` translations."""
        s = self.scores
        lines = [
            f"{self.split}: {s.sentences} sentences, beam {self.beam_size}",
            f"BLEU {s.bleu:.2f}  ({s.bleu_signature})",
            f"chrF {s.chrf:.2f}  ({s.chrf_signature})",
            f"exact match {self.exact_match:.1%}",
            "BLEU by source length (words): "
            + ", ".join(f"{b.label}: {b.bleu:.1f} (n={b.sentences})" for b in self.buckets),
        ]
        first = self.examples[:examples]
        short = self.short_examples(examples, shown=first)
        for title, group in (("the first sentences", first), ("short sentences", short)):
            if group:
                lines.append(f"\n{title} of {self.split}:")
            for source, hypothesis, reference in group:
                lines.append(
                    f"  source     {source}\n  qkv        {hypothesis}\n  reference  {reference}\n"
                )
        return lines

    def short_examples(
        self, count: int, *, shown: Sequence[tuple[str, str, str]] = (), min_words: int = 4
    ) -> list[tuple[str, str, str]]:
        """The ``count`` shortest sources of at least ``min_words`` words (in split order among
        equals), each source once, leaving out those in ``shown``: where a short-trained model
        is at its best, next to the long ones a split usually opens with."""
        seen = {source for source, _, _ in shown}
        candidates = []
        for example in self.examples:  # each source once: "Yahweh spoke to Moses, saying," recurs
            if len(example[0].split()) >= min_words and example[0] not in seen:
                seen.add(example[0])
                candidates.append(example)
        return sorted(candidates, key=lambda e: len(e[0].split()))[:count]

    def record(self) -> dict[str, Any]:
        """What ``results.json`` keeps of this split."""
        return {
            "bleu": self.scores.bleu,
            "chrf": self.scores.chrf,
            "bleu_signature": self.scores.bleu_signature,
            "chrf_signature": self.scores.chrf_signature,
            "sentences": self.scores.sentences,
            "exact_match": self.exact_match,
            "beam_size": self.beam_size,
            "bleu_by_source_length": {b.label: [b.sentences, b.bleu] for b in self.buckets},
        }

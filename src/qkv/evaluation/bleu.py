"""Corpus BLEU and chrF through sacrebleu, and BLEU by source-length bucket.

sacrebleu (Post 2018) is the reference implementation; its signature string records tokenisation,
smoothing and version so scores can be compared across papers. The bucketed view is that of
Bahdanau et al. 2015, Figure 2: translation quality as sentences get longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CorpusScores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int
    # The outputs hold an n-gram of every order BLEU counts (1..4). Without one (outputs all
    # shorter than 4 tokens) sacrebleu's corpus BLEU is 0 by definition, whatever they are.
    bleu_defined: bool = True


@dataclass(frozen=True)
class BucketScore:
    low: int  # source length in words, inclusive
    high: int | None  # inclusive; None = no upper bound
    sentences: int
    bleu: float

    @property
    def label(self) -> str:
        return f"{self.low}+" if self.high is None else f"{self.low}-{self.high}"


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up"
        )
    if not hypotheses:
        raise ValueError("no sentences to score")


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> CorpusScores:
    """sacrebleu's corpus BLEU (13a tokenisation, exp smoothing) and chrF (character 6-grams)."""
    from sacrebleu.metrics import BLEU, CHRF

    _check(hypotheses, references)
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return CorpusScores(
        b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), len(hypotheses),
        bleu_defined=all(b.totals),
    )  # fmt: skip


DEFAULT_BUCKETS = (0, 10, 20, 30, 40, 50)


def bleu_by_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    edges: Sequence[int] = DEFAULT_BUCKETS,
) -> list[BucketScore]:
    """Corpus BLEU of the sentences whose source has ``low..high`` words, for each bucket.

    ``edges = (0, 10, 20)`` gives buckets ``0-9``, ``10-19`` and ``20+``; empty buckets are omitted.
    """
    from sacrebleu.metrics import BLEU

    _check(hypotheses, references)
    if len(sources) != len(hypotheses):
        raise ValueError(f"{len(sources)} sources but {len(hypotheses)} hypotheses")
    if list(edges) != sorted(set(edges)) or not edges:
        raise ValueError(f"bucket edges must be strictly increasing, got {list(edges)}")
    buckets = []
    for i, low in enumerate(edges):
        high = edges[i + 1] - 1 if i + 1 < len(edges) else None
        rows = [
            j
            for j, src in enumerate(sources)
            if len(src.split()) >= low and (high is None or len(src.split()) <= high)
        ]
        if not rows:
            continue
        score = BLEU().corpus_score([hypotheses[j] for j in rows], [[references[j] for j in rows]])
        buckets.append(BucketScore(low, high, len(rows), score.score))
    return buckets

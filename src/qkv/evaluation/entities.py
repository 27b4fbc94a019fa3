"""Entity-level precision, recall and F1 with conlleval's semantics (the CoNLL-2000 and -2003
shared tasks' scorer; Tjong Kim Sang and De Meulder 2003), and a bootstrap interval of F1.

Entities are read from BIO tags as conlleval reads them: ``B-X`` always opens an ``X`` entity;
``I-X`` continues an open ``X`` entity and opens one after ``O``, at the start or after another
type; an entity ends at ``O``, ``B-``, or a change of type. So invalid BIO is scored, not
refused: ``O I-X`` holds one entity. This is seqeval's default (non-strict) mode,
``seqeval.metrics.sequence_labeling.get_entities``; tags in other schemes are first converted by
:func:`qkv.data.labelled.tag_schemes.convert_tags`.

A predicted entity is correct when a gold entity of the same sentence has its type and both of
its boundaries. With ``c`` correct, ``p`` predicted and ``g`` gold entities: precision ``c / p``,
recall ``c / g``, F1 ``2 c / (p + g)`` (their harmonic mean), each 0 when its denominator is 0.
A boundary error or a type error thus counts as one false positive and one false negative.
Micro scores pool the counts of every type; per type, the counts of that type alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "Entity",
    "EntityReport",
    "EntityScores",
    "bootstrap_f1",
    "entities",
    "entity_scores",
]


@dataclass(frozen=True)
class Entity:
    """A typed span of word positions ``[start, end)``."""

    type: str
    start: int
    end: int


@dataclass(frozen=True)
class EntityScores:
    """Scores over a set of entities; ``support`` is the number of gold entities,
    ``predicted`` of predicted ones, ``correct`` of predicted ones that match a gold one."""

    precision: float
    recall: float
    f1: float
    support: int
    predicted: int
    correct: int

    @classmethod
    def of(cls, correct: int, predicted: int, gold: int) -> EntityScores:
        """The scores of these counts (the formulas are in the module doc)."""
        return cls(
            precision=correct / predicted if predicted else 0.0,
            recall=correct / gold if gold else 0.0,
            f1=2 * correct / (predicted + gold) if predicted + gold else 0.0,
            support=gold,
            predicted=predicted,
            correct=correct,
        )


@dataclass(frozen=True)
class EntityReport:
    """Micro scores, scores per entity type (sorted by type: every type in the gold or the
    predicted tags), and the number of sentences scored."""

    micro: EntityScores
    per_type: dict[str, EntityScores]
    sentences: int

    def lines(self) -> list[str]:
        """The per-type table and the micro row, as conlleval prints them (a CLI prints these)."""
        width = max([len("micro"), *(len(t) for t in self.per_type)])
        header = "precision  recall      F1  support  predicted"
        lines = [f"{'type':<{width}}  {header}"]
        rows = [*self.per_type.items(), ("micro", self.micro)]
        for name, s in rows:
            lines.append(
                f"{name:<{width}}  {s.precision:9.4f}  {s.recall:6.4f}  {s.f1:6.4f}  "
                f"{s.support:7d}  {s.predicted:9d}"
            )
        return lines

    def record(self) -> dict:
        """A JSON-able dict: the micro scores' fields, ``sentences`` and ``per_type``."""
        return {
            **asdict(self.micro),
            "sentences": self.sentences,
            "per_type": {name: asdict(s) for name, s in self.per_type.items()},
        }


def _split(position: int, tag: str) -> tuple[str, str]:
    if tag == "O":
        return "O", ""
    letter, hyphen, type_ = str(tag).partition("-")
    if letter not in ("B", "I") or not hyphen or not type_:
        raise ValueError(
            f"position {position}: {tag!r} is not a BIO tag (O, B-TYPE or I-TYPE); convert "
            "other schemes with qkv.data.labelled.tag_schemes.convert_tags first"
        )
    return letter, type_


def entities(tags: Sequence[str]) -> list[Entity]:
    """The entities of one sentence's BIO ``tags``, in order, read as conlleval reads them (the
    module doc); ``end`` is exclusive.

    Raises:
        ValueError: a tag that is not ``O``, ``B-TYPE`` or ``I-TYPE`` (named, with its position).
    """
    found = []
    current, start = "", 0  # current: the type of the open entity, "" when none is open
    for position, tag in enumerate(tags):
        letter, type_ = _split(position, tag)
        if current and (letter != "I" or type_ != current):
            found.append(Entity(current, start, position))
            current = ""
        if letter == "B" or (letter == "I" and not current):
            current, start = type_, position
    if current:
        found.append(Entity(current, start, len(tags)))
    return found


def _sentence_entities(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
) -> list[tuple[set[Entity], set[Entity]]]:
    """Per sentence, (gold entities, predicted entities); checks that the two pair up."""
    if len(gold) != len(predicted):
        raise ValueError(
            f"{len(gold)} gold sentences but {len(predicted)} predicted sentences; they must "
            "pair up"
        )
    if not len(gold):
        raise ValueError("no sentences to score")
    pairs = []
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted tags")
        pairs.append((set(entities(g)), set(entities(p))))
    return pairs


def entity_scores(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
) -> EntityReport:
    """Entity precision, recall and F1 of ``predicted`` against ``gold`` (BIO tags, one list a
    sentence), micro and per type, as conlleval and seqeval's default mode score them.

    Raises:
        ValueError: different numbers of sentences, none, a sentence whose predicted tags differ
            in length from its gold tags (its index and the two lengths named), or a tag that is
            not BIO (:func:`entities`).
    """
    correct: Counter[str] = Counter()
    found: Counter[str] = Counter()
    support: Counter[str] = Counter()
    for gold_entities, predicted_entities in _sentence_entities(gold, predicted):
        correct.update(e.type for e in gold_entities & predicted_entities)
        found.update(e.type for e in predicted_entities)
        support.update(e.type for e in gold_entities)
    per_type = {
        t: EntityScores.of(correct[t], found[t], support[t]) for t in sorted(found | support)
    }
    micro = EntityScores.of(correct.total(), found.total(), support.total())
    return EntityReport(micro, per_type, len(gold))


def bootstrap_f1(
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval ``(low, high)`` of micro entity F1 (Efron and
    Tibshirani 1993, ch. 13).

    Each resample draws ``n`` of the ``n`` sentences with replacement and pools their counts of
    correct, predicted and gold entities into one F1 (sentences, not entities, are drawn, as the
    errors within a sentence are not independent). The draws are
    ``numpy.random.default_rng(seed).integers(0, n, size=(resamples, n), dtype=numpy.int32)``,
    one row a resample; the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles of the ``resamples`` F1s (``numpy.quantile``'s linear interpolation). A resample
    without predicted or gold entities has F1 0. Memory grows as ``resamples * n``: 1,000
    resamples of 3,500 sentences draw 14 MB of indices.

    Raises:
        ValueError: ``resamples`` below 1, ``level`` outside (0, 1), or inputs that
            :func:`entity_scores` refuses.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples={resamples!r}; pass a whole number of at least 1")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}; pass a confidence level between 0 and 1, e.g. 0.95")
    counts = np.array(
        [(len(g & p), len(g) + len(p)) for g, p in _sentence_entities(gold, predicted)],
        dtype=np.int64,
    )  # (n, 2): correct, predicted + gold
    n = len(counts)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n), dtype=np.int32)
    correct = counts[:, 0][draws].sum(axis=1)  # (resamples,)
    total = counts[:, 1][draws].sum(axis=1)  # (resamples,)
    f1 = np.divide(2 * correct, total, out=np.zeros(resamples), where=total > 0)
    low, high = np.quantile(f1, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)

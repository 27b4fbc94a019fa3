"""Does a dialogue model read its context? Sankar, Subramanian, Pal, Chandar and Bengio (2019),
"Do Neural Dialog Systems Use the Conversation History Effectively?": perturb the context that
ONE trained model is given at test time and compare the perplexity of the same replies.

The conditions (:data:`CONDITIONS`), each a function of the split's sources alone:

* ``true``: the real previous turn(s), as the model was trained to read them;
* ``random``: the context of another dialogue of the same split, drawn with a fixed seed: never
  the example's own, nor another one whose context is the same text;
* ``shuffled``: the context's words in a random (seeded) order, each turn's words within that
  turn (Sankar et al.'s word shuffle); the ``<turn>`` separators stay where they are, so the
  source holds the same multiset of tokens;
* ``empty``: no context, the empty source (``""``: the encoder reads ``</s>`` alone), which is
  what the model of the replies alone (``data.options.replies_only=true``) was trained on.

The replies are the same in every condition and read by the same vocabulary, so every
condition sums over the same reply tokens (``</s>`` included): the perplexities compare, and
``true`` is the perplexity ``qkv evaluate`` reports. A pointer-generator scores a reply word
outside its vocabulary as ``qkv evaluate`` does: by its extended id where the condition's
context holds the word (the model may copy it), else as ``<unk>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from qkv.data import load_corpus
from qkv.data.pairs.summary_words import TURN, summary_tokens
from qkv.tasks.run_dir import check_split
from qkv.tasks.summarisation.runner import TextToText

__all__ = [
    "CONDITIONS",
    "ConditionScore",
    "context_pairs",
    "context_perplexity",
    "perturb",
    "random_contexts",
    "shuffled_contexts",
]

CONDITIONS = ("true", "random", "shuffled", "empty")


@dataclass(frozen=True)
class ConditionScore:
    """One condition's score: ``perplexity = exp(nll / tokens)``; ``nll`` in nats, summed over
    ``tokens`` reply tokens of ``pairs`` replies."""

    perplexity: float
    nll: float
    tokens: int
    pairs: int

    def record(self) -> dict[str, float | int]:
        return {"perplexity": self.perplexity, "nll": self.nll, "tokens": self.tokens,
                "pairs": self.pairs}  # fmt: skip


def random_contexts(sources: Sequence[str], seed: int = 0) -> list[str]:
    """For each source, the source of another example drawn uniformly (a ``numpy`` generator
    seeded with ``seed``) among those whose text differs from its own.

    Raises:
        ValueError: fewer than two distinct sources (no other context to draw).
    """
    if len(set(sources)) < 2:
        raise ValueError(
            f"random contexts need at least two different sources, got {len(set(sources))} "
            f"distinct among {len(sources)}: score a larger split (a larger limit)"
        )
    rng = np.random.default_rng(seed)
    drawn: list[str] = []
    for own in sources:
        while True:  # ends: another text exists, and each draw finds one with p >= 1/n
            other = sources[int(rng.integers(len(sources)))]
            if other != own:
                drawn.append(other)
                break
    return drawn


def shuffled_contexts(sources: Sequence[str], seed: int = 0) -> list[str]:
    """Each source's tokens (:func:`~qkv.data.pairs.summary_words.summary_tokens`, what the
    model reads) in a random order within each turn, the ``<turn>`` tokens in place; joined by
    spaces (which the model's tokenizer reads back as the same tokens)."""
    rng = np.random.default_rng(seed)
    shuffled: list[str] = []
    for source in sources:
        tokens = summary_tokens(source)
        out: list[str] = []
        turn: list[str] = []
        for token in [*tokens, TURN]:
            if token != TURN:
                turn.append(token)
                continue
            out.extend(turn[i] for i in rng.permutation(len(turn)))
            out.append(TURN)
            turn = []
        shuffled.append(" ".join(out[:-1]))  # the TURN appended above dropped
    return shuffled


def perturb(sources: Sequence[str], condition: str, seed: int = 0) -> list[str]:
    """``sources`` as ``condition`` (one of :data:`CONDITIONS`) gives them to the model."""
    makers: dict[str, Callable[[Sequence[str], int], list[str]]] = {
        "true": lambda s, _: list(s),
        "random": random_contexts,
        "shuffled": shuffled_contexts,
        "empty": lambda s, _: [""] * len(s),
    }
    if condition not in makers:
        raise ValueError(f"unknown context condition {condition!r}; choose from {CONDITIONS}")
    return makers[condition](sources, seed)


def context_pairs(runner: TextToText, split: str = "test", limit: int | None = None):
    """The ``(context, reply)`` pairs of ``split`` of ``runner``'s corpus (its first ``limit``),
    with the contexts given back to a model of the replies alone (a plays corpus loaded with
    ``replies_only`` off), so that it and the model of the same corpus with its contexts are
    scored on the same pairs."""
    if runner.data is None:
        raise ValueError(f"this {runner.task} model was not loaded from a directory: no corpus")
    check_split(split)
    options = {k: v for k, v in runner.data.options.items() if k != "replies_only"}
    pairs = load_corpus(runner.data.corpus, **options).split(split)[:limit]
    if not pairs:
        raise ValueError(f"the {split} split of {runner.data.corpus} is empty")
    return pairs


def context_perplexity(
    runner: TextToText,
    pairs: Sequence[tuple[str, str]],
    conditions: Sequence[str] = CONDITIONS,
    *,
    seed: int = 0,
    batch_size: int = 32,
) -> dict[str, ConditionScore]:
    """The perplexity of the replies of ``pairs`` (``(context, reply)``) under ``runner``'s
    model with each condition's context (module docstring), by condition.

    Raises:
        ValueError: an unknown condition, no pairs, or (``random``) fewer than two distinct
            contexts.
    """
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown or not conditions:
        raise ValueError(f"unknown context condition(s) {unknown}; choose from {CONDITIONS}")
    if not pairs:
        raise ValueError("no (context, reply) pairs to score")
    sources = [s for s, _ in pairs]
    replies = [r for _, r in pairs]
    scores: dict[str, ConditionScore] = {}
    for condition in conditions:
        given = perturb(sources, condition, seed)
        nll, tokens = runner.log_loss(list(zip(given, replies, strict=True)), batch_size)
        scores[condition] = ConditionScore(math.exp(nll / max(tokens, 1)), nll, tokens, len(pairs))
    counts = {c: s.tokens for c, s in scores.items()}
    if len(set(counts.values())) > 1:  # the replies are read alike whatever the source
        raise AssertionError(f"reply token counts differ between conditions: {counts}")
    return scores

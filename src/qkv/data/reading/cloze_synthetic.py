"""A learnable toy cloze task for tests and learning checks: the answer is the name that follows
the word ``key`` in the passage (:func:`synthetic_cloze`). The real questions are
:mod:`qkv.data.reading.cloze`'s, made by :mod:`qkv.data.reading.cloze_questions`."""

from __future__ import annotations

import random
import zlib

from qkv.data.errors import DataError
from qkv.data.reading.cloze_questions import N_CANDIDATES, PLACEHOLDER, ClozeCorpus, ClozeQuestion

__all__ = ["KEY_WORD", "synthetic_cloze"]

NAMES = (
    "Alice", "Boris", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Irene", "Jonas",
    "Karla", "Leon", "Mira", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Ugo",
    "Vera", "Wanda", "Xavier", "Yuri", "Zelda", "Anton", "Bella", "Carlo", "Daria",
)  # fmt: skip
FILLERS = (
    "the", "a", "old", "house", "saw", "went", "to", "and", "then", "garden", "with", "small",
    "dog", "river", "walked", "near", "bread", "gave", "of", "green", "door", "slept", "by",
    "road", "quiet", "found", "town", "under", "tree", "cold",
)  # fmt: skip
KEY_WORD = "key"
SYNTHETIC_QUESTION = ("the", KEY_WORD, "opens", PLACEHOLDER, ".")


def _synthetic_question(rng: random.Random, source: str, length: tuple[int, int]) -> ClozeQuestion:
    size = rng.randint(*length)
    names = rng.sample(NAMES, N_CANDIDATES)
    answer = names[0]
    tokens = [rng.choice(FILLERS) for _ in range(size - 2)]
    # each candidate written once or twice, the answer's "key <answer>" counted: the answer is
    # neither more frequent nor later than the others, only after "key"
    counts = {name: rng.choice((1, 2)) for name in names}
    written = [name for name in names for _ in range(counts[name] - (name == answer))]
    for place, name in zip(rng.sample(range(len(tokens)), len(written)), written, strict=True):
        tokens[place] = name
    where = rng.randrange(len(tokens) + 1)
    tokens[where:where] = [KEY_WORD, answer]
    candidates = list(names)
    rng.shuffle(candidates)
    return ClozeQuestion(tuple(tokens), SYNTHETIC_QUESTION, answer, tuple(candidates), source)


def synthetic_cloze(
    n: int,
    *,
    seed: int = 0,
    valid: int | None = None,
    test: int | None = None,
    length: tuple[int, int] = (30, 60),
) -> ClozeCorpus:
    """A learnable toy cloze task: the answer is the name that follows the word ``key``.

    Each passage holds a number of tokens drawn from ``length`` (both ends included): words of
    :data:`FILLERS`, the ten candidate names (from :data:`NAMES`, 30 of them), each written once
    or twice, and, once, ``key <answer>`` (one of the answer's occurrences); the question is
    always ``the key opens XXXXX .``. The answer is as frequent as the other candidates and
    anywhere in the passage, so counting or position do not help; finding ``key`` does.
    ``n`` train questions, ``valid`` and ``test`` (default ``max(1, n // 10)`` each), each
    split drawn with its own generator, seeded from ``seed`` and the split's name.

    Raises:
        DataError: ``n < 1``, a split size below 1, or ``length`` below 21 or reversed.
    """
    sizes = {"train": n, "valid": max(1, n // 10) if valid is None else valid,
             "test": max(1, n // 10) if test is None else test}  # fmt: skip
    for split, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise DataError(
                f"synthetic cloze: {split} size must be a whole number >= 1, got {size!r}"
            )
    low, high = length
    if not 2 * N_CANDIDATES + 1 <= low <= high:
        raise DataError(
            f"synthetic cloze: length={length!r} must be (low, high) with 21 <= low <= high"
        )
    splits = {}
    for split, size in sizes.items():
        rng = random.Random(zlib.crc32(f"synthetic:{split}:{seed}".encode()))
        splits[split] = [
            _synthetic_question(rng, f"synthetic:{split}:{seed}:{i}", (low, high))
            for i in range(size)
        ]
    return ClozeCorpus(
        name="cloze-synthetic",
        kind="entities",
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        split_note=f"generated: seed {seed}, one generator per split (crc32 of split and seed)",
    )

"""A synthetic summarisation task that only copying can solve.

Each source is a sentence of common words with a few invented names in it; its summary is the
names, in order. Every name is a fresh random string used in one pair only, so no vocabulary
built from the training set holds a name of the valid or test pairs: a plain encoder-decoder
reads and writes each of them as ``<unk>`` and cannot score, while a pointer-generator copies
the names from its source through the extended vocabulary. The CI's
learning test trains both on it.
"""

from __future__ import annotations

import numpy as np

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair, ParallelCorpus

__all__ = ["copy_task"]

COMMON = (
    "the", "a", "king", "of", "and", "to", "in", "his", "land", "said", "with", "for", "on",
    "people", "they", "city", "went", "came", "house", "by", "sons", "all", "son", "there", "out",
    "before", "them", "which", "day", "men",
)  # fmt: skip
_LETTERS = np.array(list("bcdfghjklmnprstvz"))
_VOWELS = np.array(list("aeiou"))


def _name(rng: np.random.Generator, used: set[str]) -> str:
    while True:
        syllables = rng.integers(2, 4)
        name = "".join(rng.choice(_LETTERS) + rng.choice(_VOWELS) for _ in range(syllables))
        name += str(rng.choice(_LETTERS))
        if name not in used and name not in COMMON:
            used.add(name)
            return name


def copy_task(
    n_train: int = 3000,
    n_valid: int = 200,
    n_test: int = 200,
    *,
    names: int = 2,
    min_len: int = 5,
    max_len: int = 10,
    seed: int = 0,
) -> ParallelCorpus:
    """``(sentence with names, "name1 name2 ...")`` pairs, e.g. ``("the king of bavotek
    went to the city of rulamip", "bavotek rulamip")``.

    Args:
        n_train, n_valid, n_test: pairs per split.
        names: invented names per source (each used once in the corpus).
        min_len, max_len: common words per source (uniform, inclusive).
        seed: seed of ``numpy.random.default_rng``.
    """
    sizes = {"n_train": n_train, "n_valid": n_valid, "n_test": n_test, "names": names,
             "min_len": min_len, "max_len": max_len}  # fmt: skip
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataError(f"copy_task: {key} must be a positive int, got {value!r}")
    if min_len > max_len:
        raise DataError(f"copy_task: min_len={min_len} is larger than max_len={max_len}")
    rng = np.random.default_rng(seed)
    used: set[str] = set()
    pairs: list[Pair] = []
    for _ in range(n_train + n_valid + n_test):
        words = [str(w) for w in rng.choice(COMMON, size=int(rng.integers(min_len, max_len + 1)))]
        chosen = [_name(rng, used) for _ in range(names)]
        slots = sorted(rng.choice(len(words) + names, size=names, replace=False).tolist())
        for slot, name in zip(slots, chosen, strict=True):
            words.insert(slot, name)
        pairs.append((" ".join(words), " ".join(chosen)))
    return ParallelCorpus(
        name="copy-synthetic",
        source_lang="text",
        target_lang="names",
        train=pairs[:n_train],
        valid=pairs[n_train : n_train + n_valid],
        test=pairs[n_train + n_valid :],
        split_note=f"{n_train}/{n_valid}/{n_test} random pairs, seed {seed}; every name is "
        "used once in the whole corpus",
    )

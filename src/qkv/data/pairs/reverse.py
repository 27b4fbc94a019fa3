"""Synthetic translation tasks with a known answer, for tests and for watching attention learn.

``reverse_task`` is the sequence-reversal task of the Sockeye tutorials: the source is a sequence
of symbols, the target is the same sequence reversed, so the correct cross-attention is the
anti-diagonal.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair, ParallelCorpus

__all__ = ["reverse_task"]

_ENUMERATE_LIMIT = 1_000_000


def _symbols(vocab: str | Sequence[str]) -> list[str]:
    symbols = list(vocab)
    if not symbols:
        raise DataError("vocab must hold at least one symbol, got none")
    for symbol in symbols:
        if not isinstance(symbol, str) or not symbol or any(c.isspace() for c in symbol):
            raise DataError(f"vocab symbols must be non-empty strings without spaces: {symbol!r}")
    if len(set(symbols)) != len(symbols):
        raise DataError(f"vocab symbols must be distinct, got {symbols}")
    return symbols


def reverse_task(
    n_train: int,
    n_valid: int,
    n_test: int,
    *,
    vocab: str | Sequence[str] = "abcdefghij",
    min_len: int = 3,
    max_len: int = 12,
    seed: int = 0,
) -> ParallelCorpus:
    """Random symbol sequences paired with their reversal, e.g. ``("a b c", "c b a")``.

    Every sequence is distinct, so valid and test share no sequence with train or each other.
    Lengths are uniform in ``[min_len, max_len]`` (when all sequences of some length are used up,
    the others fill in). Deterministic for ``seed``.

    Args:
        n_train, n_valid, n_test: pairs per split.
        vocab: the symbols; a string is split into characters.
        min_len, max_len: inclusive length range, in symbols.
        seed: seed of ``numpy.random.default_rng``.

    Raises:
        DataError: bad sizes or lengths, or more sequences asked for than exist.
    """
    symbols = _symbols(vocab)
    for label, value in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        if value < 0:
            raise DataError(f"{label} must be >= 0, got {value}")
    if not 1 <= min_len <= max_len:
        raise DataError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    total = n_train + n_valid + n_test
    capacity = sum(len(symbols) ** length for length in range(min_len, max_len + 1))
    if total > capacity:
        raise DataError(
            f"asked for {total} distinct sequences but only {capacity} exist with "
            f"{len(symbols)} symbols and lengths {min_len}..{max_len}"
        )
    rng = np.random.default_rng(seed)
    if capacity <= _ENUMERATE_LIMIT and 2 * total > capacity:
        # Dense request: sample without replacement from the full list.
        every = [
            seq
            for length in range(min_len, max_len + 1)
            for seq in itertools.product(range(len(symbols)), repeat=length)
        ]
        chosen = [every[i] for i in rng.choice(len(every), size=total, replace=False).tolist()]
    else:
        # Sparse request (at least half of all sequences stay free): rejection sampling.
        seen: set[tuple[int, ...]] = set()
        chosen = []
        while len(chosen) < total:
            length = int(rng.integers(min_len, max_len + 1))
            seq = tuple(rng.integers(0, len(symbols), size=length).tolist())
            if seq not in seen:
                seen.add(seq)
                chosen.append(seq)

    def pair(seq: tuple[int, ...]) -> Pair:
        words = [symbols[i] for i in seq]
        return " ".join(words), " ".join(reversed(words))

    pairs = [pair(seq) for seq in chosen]
    return ParallelCorpus(
        name="reverse",
        source_lang="sym",
        target_lang="sym-reversed",
        train=pairs[:n_train],
        valid=pairs[n_train : n_train + n_valid],
        test=pairs[n_train + n_valid :],
        split_note=(
            f"{total} distinct random sequences (numpy default_rng({seed}), lengths "
            f"{min_len}..{max_len}, {len(symbols)} symbols); the first {n_train} train, the next "
            f"{n_valid} valid, the last {n_test} test"
        ),
    )

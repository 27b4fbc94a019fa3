"""The reverse task: targets are reversed sources, held-out sequences are unseen."""

from __future__ import annotations

import pytest

from qkv.data import DataError, reverse_task


def test_reverse_task_pairs_and_splits():
    corpus = reverse_task(300, 40, 50, min_len=2, max_len=6, seed=1)
    assert corpus.sizes() == {"train": 300, "valid": 40, "test": 50}
    for source, target in corpus.train + corpus.valid + corpus.test:
        symbols = source.split(" ")
        assert target.split(" ") == symbols[::-1]
        assert 2 <= len(symbols) <= 6 and set(symbols) <= set("abcdefghij")
    sources = [{s for s, _ in split} for split in (corpus.train, corpus.valid, corpus.test)]
    assert sum(map(len, sources)) == 390  # all distinct, so the splits are disjoint
    assert {len(s.split()) for s in sources[0]} == {2, 3, 4, 5, 6}


def test_reverse_task_is_deterministic():
    assert reverse_task(50, 5, 5, seed=7) == reverse_task(50, 5, 5, seed=7)
    assert reverse_task(50, 5, 5, seed=7).train != reverse_task(50, 5, 5, seed=8).train


def test_dense_request_uses_every_sequence():
    corpus = reverse_task(10, 2, 2, vocab="ab", min_len=1, max_len=3)  # 2 + 4 + 8 = 14 exist
    sources = [s for s, _ in corpus.train + corpus.valid + corpus.test]
    assert len(set(sources)) == 14


def test_multi_character_symbols():
    corpus = reverse_task(5, 1, 1, vocab=["x1", "y2", "z3"], min_len=2, max_len=2)
    source, target = corpus.train[0]
    assert target.split() == source.split()[::-1] and set(source.split()) <= {"x1", "y2", "z3"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vocab": "ab", "min_len": 1, "max_len": 2, "n_train": 7}, "only 6 exist"),
        ({"min_len": 0}, "min_len=0"),
        ({"min_len": 5, "max_len": 4}, "max_len=4"),
        ({"vocab": "aa"}, "distinct"),
        ({"vocab": ["a b"]}, "without spaces"),
        ({"n_train": -1}, "n_train"),
    ],
)
def test_reverse_task_errors(kwargs, message):
    options = {"n_train": 5, "n_valid": 0, "n_test": 0, **kwargs}
    with pytest.raises(DataError, match=message):
        reverse_task(**options)

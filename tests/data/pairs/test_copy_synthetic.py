"""The copy task: every summary is its source's invented names in order, each name in one pair
only, so no vocabulary of the training pairs holds a held-out pair's name."""

from __future__ import annotations

from collections import Counter

import pytest

from qkv.data.errors import DataError
from qkv.data.pairs.copy_synthetic import COMMON, copy_task
from qkv.data.pairs.summary_words import SummaryVocab, summary_tokens


def test_summaries_are_the_sources_names_in_order_each_used_once():
    corpus = copy_task(300, 20, 20, names=3, seed=4)
    assert corpus.sizes() == {"train": 300, "valid": 20, "test": 20}
    pairs = corpus.train + corpus.valid + corpus.test
    counts = Counter(name for _, summary in pairs for name in summary.split())
    assert set(counts.values()) == {1} and len(counts) == 3 * 340
    held_out = {name for _, summary in corpus.valid + corpus.test for name in summary.split()}
    for source, summary in pairs:
        words = source.split()
        assert [w for w in words if w not in COMMON] == summary.split()
        assert 5 + 3 <= len(words) <= 10 + 3
    vocab = SummaryVocab.build((summary_tokens(t) for p in corpus.train for t in p), 10**5, 1)
    assert not held_out & set(vocab.words)  # only copying can write a held-out name
    assert copy_task(30, 2, 2, seed=4).train == copy_task(30, 2, 2, seed=4).train


@pytest.mark.parametrize("bad", [{"names": 0}, {"min_len": 4, "max_len": 3}, {"n_train": True}])
def test_bad_options_are_refused(bad):
    with pytest.raises(DataError, match="copy_task"):
        copy_task(**{"n_train": 5, **bad})

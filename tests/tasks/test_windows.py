"""Long texts in overlapping windows: each word's label comes from the window where it has the
most context (against a brute-force count over every window that holds it), the runs of the
windows join into valid BIO whatever each window decoded, and a text of one window is its
window's labels unchanged."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.layers.crf import bio_transitions
from qkv.tasks.windows import overlapping_windows, stitch_labels, word_contexts

TAGS = ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]
RULES = bio_transitions(TAGS)


def _allowed(a: int, b: int) -> bool:
    return bool(RULES.allowed[a, b])


def _valid_bio(labels: list[int]) -> bool:
    return bool(RULES.start[labels[0]]) and all(
        _allowed(a, b) for a, b in itertools.pairwise(labels)
    )


def _read(sizes: list[int], budget: int, overlap: int):
    windows = overlapping_windows(sizes, budget, overlap)
    contexts = [word_contexts(sizes[s:e], (s, e), len(sizes)) for s, e in windows]
    return windows, contexts


def _best_window(sizes: list[int], windows, word: int) -> int:
    """Brute force: the window holding ``word`` with the most subwords on its nearer side (the
    text's own edges unbounded), the earlier on a tie."""
    best, most = -1, -1.0
    for k, (start, end) in enumerate(windows):
        if start <= word < end:
            left = sum(sizes[start:word]) if start > 0 else math.inf
            right = sum(sizes[word + 1 : end]) if end < len(sizes) else math.inf
            if min(left, right) > most:
                best, most = k, min(left, right)
    return best


windowed = st.integers(4, 16).flatmap(
    lambda budget: st.tuples(
        st.lists(st.integers(1, 4), min_size=1, max_size=60),
        st.just(budget),
        st.integers(0, budget // 2),
    )
)


@settings(max_examples=200, deadline=None)
@given(windowed)
def test_each_word_takes_the_label_of_the_window_where_it_has_the_most_context(case):
    sizes, budget, overlap = case
    windows, contexts = _read(sizes, budget, overlap)
    labels = [[k] * (end - start) for k, (start, end) in enumerate(windows)]  # label = window
    stitched = stitch_labels(windows, labels, contexts)
    assert stitched == [_best_window(sizes, windows, i) for i in range(len(sizes))]


def _bio_path(draw, length: int) -> list[int]:
    """A random valid BIO sequence of ``length`` tags."""
    path: list[int] = []
    for _ in range(length):
        choices = [t for t in range(len(TAGS)) if (RULES.start[t] if not path else
                                                   _allowed(path[-1], t))]  # fmt: skip
        path.append(draw(st.sampled_from(choices)))
    return path


@settings(max_examples=300, deadline=None)
@given(windowed, st.data())
def test_windows_that_each_decode_valid_bio_stitch_into_valid_bio(case, data):
    sizes, budget, overlap = case
    windows, contexts = _read(sizes, budget, overlap)
    labels = [_bio_path(data.draw, end - start) for start, end in windows]
    stitched = stitch_labels(windows, labels, contexts, _allowed)
    assert len(stitched) == len(sizes) and _valid_bio(stitched)
    if len(windows) == 1:
        assert stitched == labels[0]


def test_a_cut_that_breaks_bio_moves_to_the_nearest_place_that_keeps_it():
    o, b_loc, i_loc, b_per = TAGS.index("O"), TAGS.index("B-LOC"), TAGS.index("I-LOC"), 1
    windows = [(0, 6), (3, 9)]
    sizes = [1] * 9
    contexts = [word_contexts(sizes[s:e], (s, e), 9) for s, e in windows]
    first = [o, o, o, o, b_per, o]  # word 5: O here
    later = [b_loc, i_loc, i_loc, i_loc, o, o]  # words 3-6 an entity here
    # By context alone the later window decides from word 5 on: B-PER then I-LOC, invalid; a
    # cut at word 4 or 6 gives O then I-LOC, invalid too; at word 3, O then B-LOC.
    assert stitch_labels(windows, [first, later], contexts) == [o, o, o, o, b_per, i_loc,
                                                               i_loc, o, o]  # fmt: skip
    assert stitch_labels(windows, [first, later], contexts, _allowed) == [
        o, o, o, b_loc, i_loc, i_loc, i_loc, o, o
    ]  # fmt: skip


def test_one_window_is_its_labels_and_bad_windows_are_refused():
    assert stitch_labels([(0, 3)], [[4, 0, 2]], [[math.inf] * 3], _allowed) == [4, 0, 2]
    assert word_contexts([2, 1, 3], (0, 3), 3) == [math.inf] * 3
    assert word_contexts([2, 1, 3], (4, 7), 9) == [0, 2, 0]
    with pytest.raises(ValueError, match=r"window 0 \(0, 3\) holds 3 words, got 2 labels"):
        stitch_labels([(0, 3)], [[1, 2]], [[0, 0, 0]])
    with pytest.raises(ValueError, match="does not continue"):
        stitch_labels([(0, 3), (5, 7)], [[0] * 3, [0] * 2], [[0] * 3, [0] * 2])
    with pytest.raises(ValueError, match="start at word 0"):
        stitch_labels([], [], [])

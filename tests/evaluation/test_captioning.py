"""Caption metrics against hand-computed values and sacrebleu itself: exact match, BLEU, the tile
of an attention peak, alignment accuracy (every reference word counts; captions that stop early
leave words unaligned; a wrong word may still be aligned), and mismatched inputs named."""

from __future__ import annotations

import pytest
import torch

from qkv.evaluation.captioning import (
    alignment_accuracy,
    caption_bleu,
    exact_match,
    peak_tiles,
    score_captions,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def one_hot_maps(peaks: list[tuple[int, int]], gh: int = 2, width: int = 6) -> torch.Tensor:
    """``(L, gh, width)`` maps with weight 0.7 at each ``(row, column)`` and the rest spread."""
    maps = torch.full((len(peaks), gh, width), 0.3 / (gh * width - 1))
    for step, (row, column) in enumerate(peaks):
        maps[step, row, column] = 0.7
    return maps


def test_exact_match_by_hand():
    hypotheses = [["one", "two"], ["three"], ["four", "five"], []]
    references = [["one", "two"], ["three", "three"], ["five", "four"], []]
    assert exact_match(hypotheses, references) == 0.5


def test_bleu_is_sacrebleus_corpus_bleu():
    from sacrebleu.metrics import BLEU

    hypotheses = [["seven", "two", "nine", "one"], ["three", "three", "eight"], ["zero", "four"]]
    references = [["seven", "two", "nine", "one"], ["three", "five", "eight"], ["zero", "four"]]
    expected = BLEU().corpus_score(
        [" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]]
    )
    assert caption_bleu(hypotheses, references) == pytest.approx(expected.score)
    assert caption_bleu(references, references) == pytest.approx(100.0)


def test_peak_tiles_use_the_column_of_the_largest_weight():
    # Two regions per tile across (width 6 = 3 tiles), two rows.
    maps = one_hot_maps([(0, 0), (1, 1), (0, 2), (1, 5), (1, 4)])
    assert peak_tiles(maps, tile_width=2) == [0, 0, 1, 2, 2]
    tie = torch.zeros(1, 2, 6)
    tie[0, 1, 0] = tie[0, 0, 4] = 0.5  # row-major order: (0, 4) comes first
    assert peak_tiles(tie, tile_width=2) == [2]
    with pytest.raises(ValueError, match="tile_width 4 does not divide the 6"):
        peak_tiles(maps, tile_width=4)


def test_alignment_accuracy_by_hand():
    attention = [
        one_hot_maps([(0, 0), (1, 3), (0, 5)]),  # tiles 0, 1, 2: all aligned
        one_hot_maps([(0, 1), (0, 1)]),  # tiles 0, 0: the second word looks at the wrong tile
        one_hot_maps([(1, 0)]),  # stopped after one word: the second is not aligned
        one_hot_maps([]),  # said nothing
    ]
    word_tiles = [[0, 1, 2], [0, 1], [0, 1], [0, 1]]
    assert alignment_accuracy(attention, word_tiles, tile_width=2) == pytest.approx(5 / 9)


def test_score_captions_combines_the_three():
    hypotheses = [["one", "two"], ["three", "four"]]
    references = [["one", "two"], ["three", "five"]]  # a wrong word that looks at its tile
    attention = [one_hot_maps([(0, 0), (0, 2)]), one_hot_maps([(0, 1), (1, 3)])]
    scores = score_captions(hypotheses, references, attention, [[0, 1], [0, 1]], tile_width=2)
    assert (scores.strips, scores.words) == (2, 4)
    assert scores.exact_match == 0.5 and scores.alignment_accuracy == 1.0
    assert scores.bleu == pytest.approx(caption_bleu(hypotheses, references))
    assert scores.as_dict()["alignment_accuracy"] == 1.0


def test_mismatched_or_empty_inputs_are_named():
    with pytest.raises(ValueError, match="2 captions but 1 references"):
        exact_match([["a"], ["b"]], [["a"]])
    with pytest.raises(ValueError, match="no captions"):
        caption_bleu([], [])
    with pytest.raises(ValueError, match="no reference words"):
        alignment_accuracy([one_hot_maps([])], [[]], tile_width=2)
    with pytest.raises(ValueError, match=r"\(L, Gh, Gw\)"):
        peak_tiles(torch.zeros(3, 6), tile_width=2)

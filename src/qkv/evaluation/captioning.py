"""Caption metrics for Show, Attend and Tell (Xu et al. 2015) on strips of tiles whose words
each describe one known tile: exact caption match, corpus BLEU (sacrebleu, as
:mod:`qkv.evaluation.bleu`) and alignment accuracy.

Alignment accuracy asks whether the model looks where it should. Every reference word ``k`` of
every strip counts once: it is aligned when the generated caption has a word at position ``k``
and the peak of that step's attention map (the region of largest weight) lies on the word's own
tile. Region
column ``j`` of a map lies on tile ``j // Gw`` (``Gw`` region columns per tile). The generated
word itself need not be right: exact match scores what the model says, alignment where it
looks; a caption that stops early leaves its missing steps unaligned. Counting only correct
words instead would make the two numbers depend on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from qkv.evaluation.bleu import corpus_scores


@dataclass(frozen=True)
class CaptionScores:
    """Scores of generated captions against their references.

    Attributes:
        strips: how many captions were scored; words: reference words (alignment's denominator).
        exact_match: the fraction of captions equal to their reference, word for word.
        bleu: sacrebleu's corpus BLEU (0-100) of the captions as space-joined words.
        alignment_accuracy: the fraction of reference words whose step's attention peak lies on
            their tile (module docstring).
    """

    strips: int
    words: int
    exact_match: float
    bleu: float
    alignment_accuracy: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "strips": self.strips,
            "words": self.words,
            "exact_match": self.exact_match,
            "bleu": self.bleu,
            "alignment_accuracy": self.alignment_accuracy,
        }


def _check_pairs(hypotheses: Sequence[object], references: Sequence[object]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} captions but {len(references)} references; they must pair up"
        )
    if not hypotheses:
        raise ValueError("no captions to score")


def exact_match(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """The fraction of captions identical to their reference (same words, same order)."""
    _check_pairs(hypotheses, references)
    same = sum(list(h) == list(r) for h, r in zip(hypotheses, references, strict=True))
    return same / len(references)


def caption_bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """sacrebleu's corpus BLEU of the captions, each joined with spaces."""
    _check_pairs(hypotheses, references)
    return corpus_scores([" ".join(h) for h in hypotheses], [" ".join(r) for r in references]).bleu


def peak_tiles(attention: Tensor, tile_width: int) -> list[int]:
    """The tile of each step's attention peak: ``attention (L, Gh, Gw_total)`` -> ``L`` tiles.

    Ties go to the first region in row-major order (``argmax``)."""
    if attention.dim() != 3:
        raise ValueError(f"attention must be (L, Gh, Gw), got shape {tuple(attention.shape)}")
    if tile_width < 1 or attention.size(-1) % tile_width:
        raise ValueError(
            f"tile_width {tile_width} does not divide the {attention.size(-1)} region columns"
        )
    flat = attention.flatten(1).argmax(-1)  # (L,) row-major region index
    return (flat % attention.size(-1) // tile_width).tolist()


def alignment_accuracy(
    attention: Sequence[Tensor], word_tiles: Sequence[Sequence[int]], tile_width: int
) -> float:
    """The fraction of reference words whose generated step looks at their tile.

    Args:
        attention: per caption, the maps of the steps that generated its words
            ``(L_i, Gh, Gw_total)`` (the ``<eos>`` step excluded).
        word_tiles: per caption, the tile of each reference word (word ``k`` -> tile).
        tile_width: ``Gw``, region columns per tile.
    """
    _check_pairs(attention, word_tiles)
    aligned = total = 0
    for maps, tiles in zip(attention, word_tiles, strict=True):
        peaks = peak_tiles(maps, tile_width) if maps.size(0) else []
        total += len(tiles)
        aligned += sum(k < len(peaks) and peaks[k] == tile for k, tile in enumerate(tiles))
    if total == 0:
        raise ValueError("no reference words to align")
    return aligned / total


def score_captions(
    hypotheses: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    attention: Sequence[Tensor],
    word_tiles: Sequence[Sequence[int]],
    tile_width: int,
) -> CaptionScores:
    """Exact match, BLEU and alignment accuracy of generated captions in one go."""
    _check_pairs(hypotheses, references)
    return CaptionScores(
        strips=len(references),
        words=sum(len(t) for t in word_tiles),
        exact_match=exact_match(hypotheses, references),
        bleu=caption_bleu(hypotheses, references),
        alignment_accuracy=alignment_accuracy(attention, word_tiles, tile_width),
    )

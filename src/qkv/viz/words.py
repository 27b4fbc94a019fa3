"""Attention between words instead of subword pieces (the merging of Clark et al. 2019, "What Does
BERT Look At?", section 4.2).

A word of ``n`` pieces receives the attention of all of them, and gives what its pieces give on
average:

    W[a, b] = (1 / |a|) sum_{i in a} sum_{j in b} A[i, j]          (a: query word, b: key word)

so each word's row still sums to 1 when each piece's row does. Pieces are grouped either by an
explicit list (token -> word index) or by the piece markers of common tokenizers:

- ``"▁"`` (qkv's BPE, SentencePiece: Metaspace marks a word's first piece, ``▁mon de``): a piece
  without the mark continues the word before it, so punctuation written against a word joins it
  (``▁monde .`` is the word ``monde.``, as written in the text);
- ``"##"`` (WordPiece, BERT): a piece starting with ``##`` continues the word before it;
- ``"</w>"`` (the original subword-nmt BPE): a piece ending with ``</w>`` ends its word.

Special tokens (:data:`SPECIAL_PIECES`) are always words of their own, and ``hide_special`` drops
their rows and columns. Dropped columns are NOT renormalised away by default: a word's row then
sums to what it gave to the words left, and the rest (often most of it: attention to [SEP] or
``</s>``) is visibly missing; ``renormalise=True`` divides each row by its remaining sum instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "SPECIAL_PIECES",
    "WORD_MARKERS",
    "WordAttention",
    "found_marker",
    "merge_word_attention",
    "piece_groups",
    "word_groups",
    "word_labels",
]

SPECIAL_PIECES = ("<pad>", "<s>", "</s>", "[CLS]", "[SEP]", "[PAD]")
WORD_MARKERS = ("▁", "##", "</w>")


@dataclass(frozen=True)
class WordAttention:
    """Word-level attention: ``weights (H, Wq, Wk)`` or ``(Wq, Wk)`` and the words' labels."""

    weights: Tensor
    query_words: list[str]
    key_words: list[str]


def word_groups(
    tokens: Sequence[str], marker: str = "▁", *, special: Sequence[str] = SPECIAL_PIECES
) -> list[int]:
    """The word index of each piece (``0, 1, 1, 2, ...``), read from ``marker`` (see the module)."""
    if marker not in WORD_MARKERS:
        raise ValueError(
            f"marker must be one of {', '.join(map(repr, WORD_MARKERS))}, got {marker!r}; "
            "for another scheme pass the grouping itself (one word index per token)"
        )
    groups: list[int] = []
    word = -1
    starts = True  # the next piece starts a new word
    for token in tokens:
        if token in special:
            word, starts = word + 1, True
        else:
            if marker == "▁":
                starts = starts or token.startswith("▁")
            elif marker == "##":
                starts = starts or not token.startswith("##")
            word += int(starts)
            starts = marker == "</w>" and token.endswith("</w>")
        groups.append(word)
    return groups


def found_marker(tokens: Sequence[str]) -> str | None:
    """The first of :data:`WORD_MARKERS` that marks some piece of ``tokens`` (``"▁"`` or
    ``"##"`` starting one, ``"</w>"`` ending one), or ``None``: pieces that are words."""
    for marker in WORD_MARKERS:
        marked = (t.endswith(marker) if marker == "</w>" else t.startswith(marker) for t in tokens)
        if any(m and t != marker for m, t in zip(marked, tokens, strict=True)):
            return marker
    return None


def piece_groups(tokens: Sequence[str]) -> list[int]:
    """Each piece's word, by the marker the pieces carry (:func:`found_marker`); without one,
    each piece a word."""
    marker = found_marker(tokens)
    return list(range(len(tokens))) if marker is None else word_groups(tokens, marker)


def merge_word_attention(
    weights: Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    query_groups: Sequence[int] | None = None,
    key_groups: Sequence[int] | None = None,
    marker: str = "▁",
    hide_special: bool = False,
    renormalise: bool = False,
    special: Sequence[str] = SPECIAL_PIECES,
) -> WordAttention:
    """Merge piece-level attention into words: sum over a key word's pieces, mean over a query's.

    Args:
        weights: ``(H, Tq, Tk)`` or ``(Tq, Tk)`` float attention, rows summing to 1.
        query_tokens: the ``Tq`` piece strings (labels, and the markers read when no grouping
            is given).
        key_tokens: the ``Tk`` piece strings, likewise.
        query_groups: each query piece's word index (``0 .. W - 1``, every word used);
            default: :func:`word_groups` with ``marker``.
        key_groups: each key piece's word index, likewise.
        marker: ``"▁"``, ``"##"`` or ``"</w>"``, for pieces without an explicit grouping.
        hide_special: drop the rows and columns of special words (all of whose pieces are in
            ``special``); rows are then not renormalised unless ``renormalise``.
        renormalise: with ``hide_special``, divide each row by its remaining sum (all-zero rows
            stay zero).
        special: the special token strings.

    Returns:
        :class:`WordAttention` with ``(H, Wq, Wk)`` (or ``(Wq, Wk)``) float weights.
    """
    if weights.dim() not in (2, 3) or not weights.is_floating_point():
        raise ValueError(
            f"weights must be float (H, Tq, Tk) or (Tq, Tk) attention, got shape "
            f"{tuple(weights.shape)} and dtype {weights.dtype}"
        )
    tq, tk = weights.shape[-2:]
    q_groups = _groups("query", query_tokens, query_groups, tq, marker, special)
    k_groups = _groups("key", key_tokens, key_groups, tk, marker, special)
    q_member = _membership(q_groups, weights)  # (Tq, Wq) one-hot
    k_member = _membership(k_groups, weights)  # (Tk, Wk)
    q_mean = q_member / q_member.sum(0, keepdim=True)  # each word's column averages its pieces
    merged = q_mean.T @ weights @ k_member  # (H, Wq, Wk) or (Wq, Wk)
    q_words = word_labels(query_tokens, q_groups, special)
    k_words = word_labels(key_tokens, k_groups, special)
    if hide_special:
        q_shown = [i for i, (_, is_special) in enumerate(q_words) if not is_special]
        k_shown = [j for j, (_, is_special) in enumerate(k_words) if not is_special]
        merged = merged[..., q_shown, :][..., k_shown]
        q_words = [q_words[i] for i in q_shown]
        k_words = [k_words[j] for j in k_shown]
        if renormalise:
            merged = merged / merged.sum(-1, keepdim=True).clamp_min(torch.finfo(merged.dtype).tiny)
    elif renormalise:
        raise ValueError("renormalise applies with hide_special=True only (nothing is dropped)")
    return WordAttention(merged, [w for w, _ in q_words], [w for w, _ in k_words])


def _groups(
    side: str,
    tokens: Sequence[str],
    groups: Sequence[int] | None,
    length: int,
    marker: str,
    special: Sequence[str],
) -> list[int]:
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} {side} tokens for {length} {side} positions of weights")
    found = word_groups(tokens, marker, special=special) if groups is None else list(groups)
    if len(found) != length:
        raise ValueError(f"{side}_groups has {len(found)} entries for {length} {side} tokens")
    words = max(found, default=-1) + 1
    missing = sorted(set(range(words)) - set(found))
    if any(not isinstance(g, int) or g < 0 for g in found) or missing:
        raise ValueError(
            f"{side}_groups must give each token a word index 0 .. W - 1 using every index, "
            f"got {found}" + (f" (no token in word {missing[0]})" if missing else "")
        )
    return found


def _membership(groups: list[int], like: Tensor) -> Tensor:
    index = torch.tensor(groups, device=like.device)  # (T,)
    return torch.nn.functional.one_hot(index, max(groups, default=-1) + 1).to(like.dtype)  # (T, W)


def word_labels(
    tokens: Sequence[str], groups: Sequence[int], special: Sequence[str] = SPECIAL_PIECES
) -> list[tuple[str, bool]]:
    """Each word's label (its pieces without their markers) and whether it is special."""
    pieces: dict[int, list[str]] = {}
    for token, group in zip(tokens, groups, strict=True):
        pieces.setdefault(group, []).append(token)
    words = []
    for group in range(len(pieces)):
        parts = pieces[group]
        is_special = all(part in special for part in parts)
        label = "".join(
            part
            if part in special
            else part.removeprefix("▁").removeprefix("##").removesuffix("</w>")
            for part in parts
        )
        words.append((label, is_special))
    return words

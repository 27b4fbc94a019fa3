"""Marks on a self-attention view's tokens: one label per token (a named-entity tagger's entity
type, a part-of-speech tagger's tag; ``""`` for none), drawn beside the tokens' own labels.

    check_marks("encoder", marks, tokens, tokens, self_attention=True)
    word_marks(marks, groups)        # a word takes its first piece's mark
    marked_labels(tokens, marks)     # ["<s>", "▁Paul [person]", "▁flew", ...]

Marks belong to one sequence, so only a self-attention view (queries and keys the same tokens)
carries them; when pieces are merged into words (:mod:`qkv.viz.words`) a word's mark is its
first piece's, as a tagger tags a word by its first piece.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["check_marks", "marked_labels", "word_marks"]


def check_marks(
    view_id: str,
    marks: Sequence[str],
    queries: Sequence[str],
    keys: Sequence[str],
    *,
    self_attention: bool,
) -> list[str]:
    """``marks`` as a list, or a ``ValueError`` naming what is wrong: a view that is not
    self-attention (its queries and keys are two sequences), a length that is not the tokens',
    a mark that is not a str."""
    if isinstance(marks, str):
        raise TypeError(f"marks of {view_id!r} must be a list of str (one per token), got a str")
    marks = list(marks)
    if not self_attention or len(queries) != len(keys):
        raise ValueError(
            f"marks of {view_id!r}: marks label the one sequence of a self-attention view, but "
            f"this view has {len(queries)} queries and {len(keys)} keys"
            + ("" if self_attention else " of two sequences")
            + "; pass marks=None"
        )
    if len(marks) != len(keys):
        raise ValueError(
            f"marks of {view_id!r} has {len(marks)} entries for {len(keys)} tokens; pass one "
            "label per token ('' for none)"
        )
    odd = [m for m in marks if not isinstance(m, str)]
    if odd:
        raise TypeError(f"marks of {view_id!r} must be str ('' for none), got {odd[0]!r}")
    return marks


def word_marks(marks: Sequence[str], groups: Sequence[int]) -> list[str]:
    """Each word's mark: that of its first piece (``groups``: each piece's word index,
    ``0 .. W - 1``, as :func:`~qkv.viz.words.word_groups` gives)."""
    words: dict[int, str] = {}
    for mark, group in zip(marks, groups, strict=True):
        words.setdefault(group, mark)
    return [words[group] for group in range(len(words))]


def marked_labels(tokens: Sequence[str], marks: Sequence[str] | None) -> list[str]:
    """The tokens' labels with each non-empty mark after its token: ``"Paul [person]"``."""
    if marks is None:
        return list(tokens)
    return [f"{t} [{m}]" if m else t for t, m in zip(tokens, marks, strict=True)]

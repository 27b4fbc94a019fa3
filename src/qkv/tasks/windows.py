"""Reading a text longer than the model in overlapping windows of whole words, and deciding each
word from the window that saw the most of its context.

A model of ``max_len`` positions reads a long text in windows; a word near a window's edge is
read without the words beyond the edge, so an entity cut by the edge (``New`` | ``York``) loses
what makes it one. Neighbouring windows therefore share words (:func:`overlapping_windows`, the
"doc stride" with which Devlin et al. 2019 read SQuAD; the span reader reads its passages so),
and each word takes the label of the window in which it sits furthest from an edge: the one with
the largest ``min(left, right)``, the subwords the window holds on either side of the word (the
"max context" rule of BERT's SQuAD code; an edge that is the text's own start or end cuts
nothing and counts as unbounded), the earlier window on a tie. Between two windows that rule
changes its mind once: going right, the later window's context grows against the earlier's
(both gain left context and lose right context at the same rate until the earlier one's right
edge is the nearer, after which its advantage only shrinks), so each window decides one run of
words and :func:`stitch_labels` joins the runs at one cut per window.

A window's labels are decoded jointly (a CRF's Viterbi path, or the most probable sequence
under constraints such as BIO's ``I-X`` only after ``B-X`` or ``I-X``), so each run is a valid
sequence; only a cut can join two labels no window chose together. :func:`stitch_labels` checks
the cut against the transition rules and, when they forbid it, moves it to the nearest place in
the overlap where they allow it. For BIO such a place always exists: at the first word of the
later window, whose label is one a sentence may open with (``O`` or ``B-X``), which BIO allows
after any label; so the stitched sequence is valid BIO.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["overlapping_windows", "stitch_labels", "word_contexts"]


def overlapping_windows(sizes: Sequence[int], budget: int, overlap: int) -> list[tuple[int, int]]:
    """``(start, end)`` word ranges covering words of ``sizes`` subwords each, in order: each
    window holds at most ``budget`` subwords (a single word of more is a window of its own) and
    begins with as many of the previous window's last words as fit in ``overlap`` subwords
    (always fewer than all of them, and leaving room for the next word, so every window moves
    on at both ends). With ``2 * overlap <= budget`` and no word over ``budget``, every run of
    words of at most ``overlap`` subwords lies whole in some window. ``overlap=0``: windows that
    share nothing, each filled greedily."""
    if budget < 1 or overlap < 0:
        raise ValueError(f"budget must be >= 1 and overlap >= 0, got {budget} and {overlap}")
    windows: list[tuple[int, int]] = []
    start, n = 0, len(sizes)
    while start < n:
        end, used = start, 0
        while end < n and used + sizes[end] <= budget:
            used += sizes[end]
            end += 1
        end = max(end, start + 1)
        windows.append((start, end))
        if end == n:
            break
        back, shared = end, 0  # the next window starts at back and reaches past end
        while (
            back - 1 > start
            and shared + sizes[back - 1] <= overlap
            and shared + sizes[back - 1] + sizes[end] <= budget
        ):
            shared += sizes[back - 1]
            back -= 1
        start = back
    return windows


def word_contexts(sizes: Sequence[int], window: tuple[int, int], length: int) -> list[float]:
    """For each word of ``window`` (``(start, end)`` into a text of ``length`` words; ``sizes``:
    the subwords of the window's words), ``min(left, right)``: the subwords the window holds
    before and after it, ``inf`` on a side where the window reaches the text's own edge."""
    start, end = window
    if len(sizes) != end - start:
        raise ValueError(f"window {window} holds {end - start} words, got {len(sizes)} sizes")
    total, before = sum(sizes), 0
    contexts = []
    for size in sizes:
        left = before if start > 0 else math.inf
        right = total - before - size if end < length else math.inf
        contexts.append(min(left, right))
        before += size
    return contexts


def stitch_labels(
    windows: Sequence[tuple[int, int]],
    labels: Sequence[Sequence[int]],
    contexts: Sequence[Sequence[float]],
    allowed: Callable[[int, int], bool] | None = None,
) -> list[int]:
    """One label per word of a text read in ``windows`` (in order, as
    :func:`overlapping_windows` makes them): each word's from the window where its context
    (:func:`word_contexts`) is largest, the earlier window on a tie, with each cut between two
    windows' runs moved to the nearest place the transition rules ``allowed(previous, next)``
    accept when they reject it (module doc). ``labels[k]`` and ``contexts[k]`` hold one value
    per word of window ``k``."""
    if not windows or windows[0][0] != 0:
        raise ValueError(f"windows must start at word 0, got {list(windows)[:1]}")
    for k, (start, end) in enumerate(windows):
        if len(labels[k]) != end - start or len(contexts[k]) != end - start:
            raise ValueError(
                f"window {k} ({start}, {end}) holds {end - start} words, got "
                f"{len(labels[k])} labels and {len(contexts[k])} contexts"
            )
    stitched, seen = list(labels[0]), list(contexts[0])
    for k in range(1, len(windows)):
        start, end = windows[k]
        if not 0 < start <= len(stitched) < end:
            raise ValueError(f"window {k} ({start}, {end}) does not continue the ones before it")
        ours = contexts[k]
        cut = next(
            (i for i in range(start, len(stitched)) if ours[i - start] > seen[i]), len(stitched)
        )
        if allowed is not None:
            cut = _allowed_cut(stitched, labels[k], start, cut, allowed)
        stitched[cut:] = labels[k][cut - start :]
        seen[cut:] = ours[cut - start :]
    return stitched


def _allowed_cut(
    stitched: list[int],
    later: Sequence[int],
    start: int,
    cut: int,
    allowed: Callable[[int, int], bool],
) -> int:
    """The place nearest ``cut`` (to the left on a tie), between the later window's first word
    ``start`` and the end of ``stitched``, where ``stitched[place - 1]`` may precede
    ``later[place - start]``; ``cut`` itself when no place may."""
    for distance in range(len(stitched) - start + 1):
        for place in (cut - distance, cut + distance):
            if start <= place <= len(stitched) and allowed(
                stitched[place - 1], later[place - start]
            ):
                return place
    return cut

"""Rows grouped by sentence, for the lean decode steps (:mod:`qkv.models.transformer.decode`,
:mod:`qkv.models.rnn_decode`): their states keep the source side once per sentence, ``G``
sentences with ``K`` rows (hypotheses) each, ``R = G * K`` rows in sentence order, and select
it only when sentences leave or repeat."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["select_sentences"]


def select_sentences(
    index: Tensor, group: int, sentences: int, owner: str
) -> tuple[Tensor | None, int]:
    """The sentences kept by rows ``index (R',)`` of a state of ``sentences`` sentences with
    ``group`` rows each.

    Returns:
        ``(runs, group')``: ``runs (G',)`` the old index of each kept sentence, in order, or
        ``None`` when every sentence stays where it is; ``group'`` the rows per sentence after.

    Raises:
        ValueError: unless the rows of each sentence come together, the same number for each,
            and the sentences in order (what greedy and beam search do); ``owner`` names the
            caller in the message.
    """
    sentence = index // group  # (R',) the sentence of each new row
    runs, counts = torch.unique_consecutive(sentence, return_counts=True)
    new_group = int(counts[0]) if counts.numel() else 1
    ordered = runs.numel() < 2 or bool((runs.diff() > 0).all())
    if not bool((counts == new_group).all()) or not ordered:
        raise ValueError(
            f"{owner}.select_state takes the rows of each sentence together, "
            f"the same number for each and sentences in order; got {index.tolist()}"
        )
    kept = torch.arange(runs.numel(), device=index.device)
    if runs.numel() == sentences and bool((runs == kept).all()):
        return None, new_group
    return runs, new_group

"""One decoded output sentence, as returned by greedy and beam search.

The score of beam search is the GNMT score of Wu et al. 2016, eq. (14):
``s(Y, X) = log P(Y | X) / lp(Y)``, with ``lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha`` and ``|Y|``
the number of generated tokens, the final EOS included.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class Hypothesis:
    """A finished output sentence.

    Attributes:
        tokens: generated token ids, without BOS and without the final EOS.
        score: ``log_prob / lp(len(tokens) + 1)`` (beam search's GNMT length penalty);
            equal to ``log_prob`` for greedy search and for beam search with ``alpha = 0``.
        log_prob: sum of the log-probabilities of every generated token, the EOS included.
        attention: ``(len(tokens) + 1, S)``: row ``i`` is the model's attention over its input
            (``StepOutput.attention``) when it produced token ``i`` (the last row: the EOS);
            ``S`` counts this sentence's real positions (``True`` in the encoding's ``keep``:
            its source length, or the regions of a strip's real tiles), in their order.
            ``None`` when the model returns no attention.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None

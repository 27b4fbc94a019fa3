"""Typed results shared by every model family.

Attention maps are keyed by kind (``"encoder"``, ``"decoder"``, ``"cross"``), each a list with one
``(B, H, Tq, Tk)`` tensor per layer (``H = 1`` for single-head RNN attention). Plotting consumes
this and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass(frozen=True)
class Seq2SeqOutput:
    """What a sequence-to-sequence model's ``forward`` returns.

    Attributes:
        logits: ``(B, T, V)`` next-token scores for every target position.
        attentions: ``{"encoder" | "decoder" | "cross": [(B, H, Tq, Tk) per layer]}``; filled only
            when ``need_weights=True``.
    """

    logits: Tensor
    attentions: dict[str, list[Tensor]] = field(default_factory=dict)


@dataclass(frozen=True)
class StepOutput:
    """One decoding step of a :class:`~qkv.decoding.protocol.StepModel`.

    Attributes:
        log_probs: ``(B, V)`` log-probabilities of the next token.
        state: the decoder state to pass to the next step.
        attention: ``(B, S)`` attention over the source used for this step (averaged over heads
            and, for Transformers, taken from the last cross-attention layer), or ``None``.
    """

    log_probs: Tensor
    state: object
    attention: Tensor | None = None


@dataclass(frozen=True)
class LMOutput:
    """What a language model's ``forward`` returns.

    Attributes:
        logits: ``(B, T, V)`` next-token scores for every position.
        attentions: ``{"decoder": [(B, H, T, S) per layer]}``; filled only when
            ``need_weights=True``.
    """

    logits: Tensor
    attentions: dict[str, list[Tensor]] = field(default_factory=dict)

"""Typed results shared by every model family.

Attention maps are keyed by kind (``"encoder"``, ``"decoder"``, ``"cross"``), each a list with one
``(B, H, Tq, Tk)`` tensor per layer (``H = 1`` for single-head RNN attention). Plotting consumes
this and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from qkv.layers.copy import CopyOutput


@dataclass(frozen=True)
class Seq2SeqOutput:
    """What a sequence-to-sequence model's ``forward`` returns.

    Attributes:
        logits: ``(B, T, V)`` next-token scores for every target position.
        attentions: ``{"encoder" | "decoder" | "cross": [(B, H, Tq, Tk) per layer]}``; filled only
            when ``need_weights=True``.
        copy: a copying model's copy attention ``(B, T, S)``, ``p_gen`` logit ``(B, T)`` and
            coverage loss (:class:`~qkv.layers.copy.CopyOutput`); ``None`` for the others.
    """

    logits: Tensor
    attentions: dict[str, list[Tensor]] = field(default_factory=dict)
    copy: CopyOutput | None = None


@dataclass(frozen=True)
class StepOutput:
    """One decoding step of a :class:`~qkv.decoding.protocol.StepModel`.

    Attributes:
        log_probs: ``(B, V)`` log-probabilities of the next token.
        state: the decoder state to pass to the next step.
        attention: ``(B, S)`` attention over what the decoder reads (the source tokens of a
            translation model, the image regions of a captioner) used for this step (averaged
            over heads and, for Transformers, taken from the last cross-attention layer), or
            ``None``.
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


@dataclass(frozen=True)
class BertOutput:
    """What a BERT encoder's ``forward`` returns.

    Attributes:
        hidden: ``(B, T, D)`` contextual states of every token (padding included; mask it out).
        pooled: ``(B, D)`` ``tanh(W h[:, 0] + b)``, the pooled first ([CLS]) token.
        attentions: one ``(B, H, T, T)`` self-attention weight per layer when
            ``need_weights=True``, else ``None``.
    """

    hidden: Tensor
    pooled: Tensor
    attentions: list[Tensor] | None = None


@dataclass(frozen=True)
class ClassifierOutput:
    """What a sequence classifier's ``forward`` returns.

    Attributes:
        logits: ``(B, K)`` label scores.
        penalty: scalar ``||A A^T - I||_F^2`` averaged over the batch (structured self-attention
            pooling, Lin et al. 2017), else ``None``.
        attentions: one ``(B, H, T, T)`` encoder self-attention map per layer when
            ``need_weights=True`` (empty for an encoder without attention), else ``None``.
        pooling_weights: the pooling's attention over tokens, ``(B, T)`` or ``(B, r, T)`` for
            ``r`` hops, when ``need_weights=True`` and the pooling attends, else ``None``.
    """

    logits: Tensor
    penalty: Tensor | None = None
    attentions: list[Tensor] | None = None
    pooling_weights: Tensor | None = None


@dataclass(frozen=True)
class TaggerOutput:
    """What a sequence tagger's ``forward`` returns.

    Attributes:
        logits: ``(B, T, K)`` tag scores for every position (meaningless at padded ones).
        attentions: one ``(B, H, T, T)`` encoder self-attention map per layer when
            ``need_weights=True``, else ``None``.
    """

    logits: Tensor
    attentions: list[Tensor] | None = None


@dataclass(frozen=True)
class ViTOutput:
    """What a Vision Transformer's ``forward`` returns.

    Attributes:
        logits: ``(B, K)`` class scores from the final [CLS] state, or ``None`` without a head.
        hidden: ``(B, 1 + P, D)`` final states after the last LayerNorm, [CLS] first, then the
            ``P`` patches in row-major order.
        attentions: one ``(B, H, 1 + P, 1 + P)`` self-attention weight per layer when
            ``need_weights=True``, else ``None``.
    """

    logits: Tensor | None
    hidden: Tensor
    attentions: list[Tensor] | None = None


@dataclass(frozen=True)
class ReaderOutput:
    """What a cloze reader's ``forward`` returns (:mod:`qkv.models.cloze_reader`).

    Attributes:
        log_probs: ``(B, C)`` log-probabilities over the candidates; a masked candidate has
            probability 0 and the dtype's minimum as its (finite) log-probability.
        attention: ``(B, S)`` the question-to-passage attention (zero on padding), or ``None``
            for a reader without attention.
    """

    log_probs: Tensor
    attention: Tensor | None = None


@dataclass(frozen=True)
class SpanOutput:
    """What a span reader's ``forward`` returns (:mod:`qkv.models.span_reader`).

    Attributes:
        start_log_probs: ``(B, S)`` log-probabilities of the answer's first passage token.
        end_log_probs: ``(B, S)`` log-probabilities of its last token; both are the dtype's
            minimum (finite) on padding.
        question_weights: ``(B, Q)`` the self-attentive pooling of the question (zero on padding).
        aligned: ``(B, S, Q)`` the aligned question embedding's attention of every passage token
            over the question, or ``None`` when the model has none.
        null_log_probs: ``(B,)`` ``log P_start(null) + log P_end(null)``, that the row holds no
            answer, for a model that reads a passage in windows (the encoder span reader points
            at ``[CLS]`` there, as BERT does); the start and end log-probabilities over the
            passage then sum to less than one. ``None`` for a model that reads whole passages.
    """

    start_log_probs: Tensor
    end_log_probs: Tensor
    question_weights: Tensor
    aligned: Tensor | None = None
    null_log_probs: Tensor | None = None

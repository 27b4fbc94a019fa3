"""A span reader on a Transformer encoder: DrQA's answer head over a fine-tuned MiniLM (or any
encoder the classifier and the tagger take).

Devlin et al. 2019 (sec. 4.2) read question and passage as one sequence and point at the answer;
here the pointer is DrQA's (:class:`~qkv.models.span_reader.SpanPointer`), so the two span readers
differ only in what encodes the words:

    ids (B, T) = [CLS] question subwords [SEP] passage subwords [SEP], keep (B, T)
        |
    encoder: BERT-family (all-MiniLM-L6-v2, fine-tuned), or qkv's Transformer/BiLSTM on a BPE
        |  hidden (B, T, D)
    gather each word's first subword:  p_i = hidden[passage_first_i]   (B, S, D)
                                       [; casing embedding of word i's shape]  (+ C)
                                       q_j = hidden[question_first_j]  (B, Q, D)
        |
    SpanPointer over [null; p_1 .. p_S], the null answer read at [CLS] (p_0 = hidden[0]):
        q = Σ_j b_j q_j,  P_start(i) ∝ exp(q^T W_s p_i),  P_end(i) ∝ exp(q^T W_e p_i)
        |
    start_log_probs, end_log_probs (B, S) over passage words; null_log_probs (B,)

Answers are word spans, as the BiLSTM reader's are, so both decode, score and draw alike. An
uncased encoder (MiniLM lower-cases its input) cannot see which words are capitalised, the
mark of a name; the casing feature (``casing_dim > 0``, as the tagger's) adds an embedding of
each passage word's shape to its state before the pointer. A
passage longer than the encoder's positions is read in overlapping windows by the task
(:mod:`qkv.tasks.reading.subwords`); the model sees one window per row. A window may not hold
the answer, so the pointer may also point at ``[CLS]``, "no answer here" (Devlin et al.'s
SQuAD reader does the same): a window without a gold span is trained to point there, and
answers from different windows compare, since each one's probability counts the null's mass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qkv.config_values import check_casing, check_positive_ints
from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.outputs import SpanOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sequence_encoder import NestedTextEncoder, build_encoder
from qkv.models.span_reader import SpanDecoding, SpanPointer

__all__ = ["PRESETS", "EncoderSpanReader", "EncoderSpanReaderConfig"]

PRESETS = TABLE["encoder_span_reader"]


@dataclass(frozen=True)
class EncoderSpanReaderConfig(
    NestedTextEncoder, Presets, family="encoder_span_reader", sizes=("vocab_size",)
):
    """Sizes of an :class:`EncoderSpanReader`.

    Flat in a model section and in ``config.json``: :mod:`qkv.models.sequence_encoder`.

    Args:
        text: qkv's text encoder (:class:`TextEncoderConfig`); ``None`` beside ``bert``.
        bert: a BERT-family encoder instead of ``text``: its
            :class:`~qkv.models.bert.model.BertConfig` fields (a pretrained one, fine-tuned).
        dropout: on the encoder's states before the pointer; ``None``: the text encoder's (0.1
            beside BERT).
        max_answer_length: the most words :meth:`EncoderSpanReader.decode` lets a span cover.
        casing_dim: width ``C`` of the casing embedding of each passage word's shape (0: none);
            num_shapes: the word shapes it embeds (the task sets it, from
            :data:`qkv.data.labelled.word_shape.SHAPES`).
    """

    text: TextEncoderConfig | None
    bert: dict[str, Any] | None = None
    dropout: float | None = None
    max_answer_length: int = 15
    casing_dim: int = 0
    num_shapes: int = 0

    def __post_init__(self) -> None:
        self.check_encoder()
        check_positive_ints(self, ("max_answer_length",))
        check_casing(self)


class EncoderSpanReader(SpanDecoding, nn.Module):
    """Start and end distributions over the passage words of ``[CLS] q [SEP] p [SEP]``.

    Args:
        config: an :class:`EncoderSpanReaderConfig`.

    Shape:
        ``ids (B, T)`` right-padded, ``keep (B, T)`` boolean (``True`` at real tokens);
        ``passage_first (B, S)`` and ``question_first (B, Q)``: the position in ``ids`` of each
        passage and question word's first subword, with ``passage_keep (B, S)`` and
        ``question_keep (B, Q)`` boolean, ``True`` at real words (at least one per row; a
        padded word's position is ignored) -> :class:`~qkv.models.outputs.SpanOutput` over the
        passage words (``aligned`` is ``None``; ``null_log_probs`` is set). With the casing
        feature, ``passage_shapes (B, S)``: each passage word's shape id
        (:func:`qkv.data.labelled.word_shape.word_shape`).
    """

    def __init__(self, config: EncoderSpanReaderConfig) -> None:
        super().__init__()
        self.config = c = config
        self.encoder, width = build_encoder(c)
        self.dropout = nn.Dropout(c.head_dropout)
        self.casing = nn.Embedding(c.num_shapes, c.casing_dim) if c.casing_dim else None
        self.pointer = SpanPointer(width + c.casing_dim, width)

    def forward(
        self,
        ids: Tensor,
        keep: Tensor,
        passage_first: Tensor,
        passage_keep: Tensor,
        question_first: Tensor,
        question_keep: Tensor,
        passage_shapes: Tensor | None = None,
    ) -> SpanOutput:
        """See the class docstring."""
        _check_first(passage_first, passage_keep, ids, "passage")
        _check_first(question_first, question_keep, ids, "question")
        hidden = self.dropout(self.encoder(ids, keep=keep).hidden)  # (B, T, D)
        passage = _gather(hidden, passage_first, passage_keep)  # (B, S, D)
        question = _gather(hidden, question_first, question_keep)  # (B, Q, D)
        # The null answer, at [CLS]: position 0 of [null; passage words] (B, 1 + S, D).
        passage = torch.cat([hidden[:, :1], passage], dim=1)
        with_null = torch.cat([passage_keep.new_ones(passage_keep.size(0), 1), passage_keep], 1)
        if self.casing is not None:
            if passage_shapes is None or passage_shapes.shape != passage_first.shape:
                got = None if passage_shapes is None else tuple(passage_shapes.shape)
                raise ValueError(
                    f"this reader reads word shapes (casing_dim={self.config.casing_dim}): pass "
                    f"passage_shapes of passage_first's shape {tuple(passage_first.shape)}, got "
                    f"{got}"
                )
            shapes = torch.cat([passage_shapes.new_zeros(passage_shapes.size(0), 1),
                                passage_shapes], 1)  # (B, 1 + S); 0 at [CLS]  # fmt: skip
            passage = torch.cat([passage, self.casing(shapes)], dim=-1)  # (B, 1 + S, D + C)
        elif passage_shapes is not None:
            raise ValueError("passage_shapes given, but this reader has no casing (casing_dim=0)")
        start, end, weights = self.pointer(passage, with_null, question, question_keep)
        null = start[:, 0] + end[:, 0]  # (B,)
        return SpanOutput(start[:, 1:], end[:, 1:], weights, null_log_probs=null)


def _gather(hidden: Tensor, first: Tensor, keep: Tensor) -> Tensor:
    """``hidden (B, T, D)`` at ``first (B, W)`` -> ``(B, W, D)``; padded words read position 0."""
    index = first.masked_fill(~keep, 0)  # (B, W)
    return hidden.gather(1, index[..., None].expand(-1, -1, hidden.size(-1)))


def _check_first(first: Tensor, keep: Tensor, ids: Tensor, name: str) -> None:
    if ids.dim() != 2:
        raise ValueError(f"ids must be (B, T), got shape {tuple(ids.shape)}")
    if first.dim() != 2 or first.size(0) != ids.size(0) or first.dtype != torch.long:
        raise ValueError(
            f"{name}_first must be a (B={ids.size(0)}, W) long tensor of positions in ids, got "
            f"shape {tuple(first.shape)} and dtype {first.dtype}"
        )
    if keep.dtype != torch.bool or keep.shape != first.shape:
        raise ValueError(
            f"{name}_keep must be a boolean tensor of shape {tuple(first.shape)}, got shape "
            f"{tuple(keep.shape)} and dtype {keep.dtype}"
        )
    empty = (~keep.any(dim=-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{name}_keep has no kept position in batch row(s) {empty}")
    kept = first[keep]
    if kept.numel() and (int(kept.min()) < 0 or int(kept.max()) >= ids.size(1)):
        raise ValueError(
            f"{name}_first must lie in [0, T={ids.size(1)}), got min {int(kept.min())} and max "
            f"{int(kept.max())}"
        )

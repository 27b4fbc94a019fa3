"""A sequence classifier: a text encoder, a pooling, and a linear layer to the labels.

    ids (B, T), keep (B, T)
        |
    text encoder: Transformer, or BiLSTM (+ self-attention)     (qkv.layers.text_encoder)
        |  hidden (B, T, D), attentions [(B, H, T, T) per layer]
    pooling: cls | mean | max | attention | structured         (qkv.layers.pooling)
        |  vector (B, D) or (B, r * D); weights (B, T) or (B, r, T); penalty
    Dropout, Linear
        |
    logits (B, K)

The ``"bilstm-attention"`` preset is the model of Lin et al. 2017, "A Structured Self-attentive
Sentence Embedding": a BiLSTM, ``r`` hops of attention ``A = softmax(W_s2 tanh(W_s1 H^T))`` and
the loss ``CE + penalty_weight * ||A A^T - I||_F^2`` (section 2.2; the model returns the
penalty as ``ClassifierOutput.penalty``; its coefficient is a setting of the training loss, the
classification task's ``train.penalty_weight``, not of the model).
``"cls"`` pooling reads position 0: the task prepends a ``[CLS]`` token to every sequence (BERT,
Devlin et al. 2019).

The encoder is any module called as ``encoder(ids, *, keep, need_weights)`` that returns an
object with ``.hidden (B, T, D)`` and ``.attentions``. The config's ``text`` builds qkv's text
encoder; its ``bert`` (in a flat model section, ``encoder: bert``) builds a
:class:`~qkv.models.bert.model.BertEncoder` (the architecture of the pretrained encoder a task
fine-tunes, e.g. all-MiniLM-L6-v2; the task loads its weights); any other ready-made one can be
passed as ``EncoderClassifier(config, encoder=..., encoder_dim=D)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qkv.config_values import check_choice, check_positive_ints
from qkv.layers.pooling import POOLINGS, build_pooling
from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.outputs import ClassifierOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sequence_encoder import NestedTextEncoder, build_encoder

__all__ = ["PRESETS", "EncoderClassifier", "EncoderClassifierConfig"]

# Named sizes (all of them live in qkv.models.presets); the vocabulary and the labels come from
# the task.
PRESETS = TABLE["encoder_classifier"]


@dataclass(frozen=True)
class EncoderClassifierConfig(
    NestedTextEncoder, Presets, family="encoder_classifier", sizes=("vocab_size", "num_labels")
):
    """Sizes of an :class:`EncoderClassifier`.

    A run configuration's model section (and a trained model's ``config.json``) spells it flat,
    the text encoder's keys beside the head's: :mod:`qkv.models.sequence_encoder`.

    Args:
        text: the text encoder's (:class:`TextEncoderConfig`: vocabulary, encoder, widths,
            dropout, ...); ``None`` beside ``bert``.
        num_labels: ``K``.
        pooling: ``"cls"`` (position 0, a prepended ``[CLS]``), ``"mean"``, ``"max"``,
            ``"attention"`` (one learned additive query) or ``"structured"`` (Lin et al. 2017).
        hops: ``r`` of structured pooling; attention_dim: the hidden width of the attention and
            structured poolings' scores (``d_a``).
        bert: a BERT-family encoder instead of ``text``: its
            :class:`~qkv.models.bert.model.BertConfig` fields (the architecture of the pretrained
            encoder a task fine-tunes, e.g. all-MiniLM-L6-v2; the task loads its weights).
        dropout: on the pooled vector; ``None``: the text encoder's (0.1 beside BERT).
    """

    text: TextEncoderConfig | None
    num_labels: int
    pooling: str = "cls"
    hops: int = 1
    attention_dim: int = 128
    bert: dict[str, Any] | None = None
    dropout: float | None = None

    def __post_init__(self) -> None:
        self.check_encoder()
        check_positive_ints(self, ("num_labels", "hops", "attention_dim"))
        check_choice("pooling", self.pooling, POOLINGS)


class EncoderClassifier(nn.Module):
    """Labels for whole sequences.

    Args:
        config: an :class:`EncoderClassifierConfig`.
        encoder: a ready-made encoder to use instead of building the config's (its ``text`` or
            ``bert`` is then unused); encoder_dim: its width ``D`` (default: its
            ``output_dim``).

    Shape:
        ``ids (B, T)`` right-padded, ``keep (B, T)`` boolean, ``True`` at real tokens (``None``:
        every token is real) -> ``logits (B, K)``.
    """

    def __init__(
        self,
        config: EncoderClassifierConfig,
        *,
        encoder: nn.Module | None = None,
        encoder_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.config = c = config
        self.encoder, width = build_encoder(c, encoder, encoder_dim)
        self.pooling = build_pooling(c.pooling, width, attention_dim=c.attention_dim, hops=c.hops)
        self.dropout = nn.Dropout(c.head_dropout)
        self.output_proj = nn.Linear(self.pooling.output_dim, c.num_labels)

    def forward(
        self, ids: Tensor, *, keep: Tensor | None = None, need_weights: bool = False
    ) -> ClassifierOutput:
        """Logits for each sequence of ``ids (B, T)``.

        Args:
            ids: ``(B, T)`` token ids, real tokens first (``[CLS]`` first for ``"cls"`` pooling).
            keep: ``(B, T)`` boolean, ``True`` at real tokens; ``None``: all real.
            need_weights: also return the encoder's attention maps and the pooling weights (the
                logits are the same either way).

        Returns:
            :class:`ClassifierOutput`: ``logits (B, K)``; ``penalty`` (structured pooling, always);
            ``attentions`` ``[(B, H, T, T) per layer]`` and ``pooling_weights`` ``(B, T)`` or
            ``(B, r, T)`` when ``need_weights``.
        """
        if keep is None:
            keep = torch.ones_like(ids, dtype=torch.bool) if ids.dim() == 2 else None
        encoded = self.encoder(ids, keep=keep, need_weights=need_weights)
        pooled = self.pooling(encoded.hidden, keep)
        logits = self.output_proj(self.dropout(pooled.vector))  # (B, K)
        if not need_weights:
            return ClassifierOutput(logits, pooled.penalty)
        return ClassifierOutput(logits, pooled.penalty, list(encoded.attentions), pooled.weights)

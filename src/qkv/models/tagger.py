"""A sequence tagger: a text encoder and a linear layer giving one label per position.

    ids (B, T), keep (B, T)
        |
    text encoder: Transformer, or BiLSTM (+ self-attention)     (qkv.layers.text_encoder)
        |  hidden (B, T, D), attentions [(B, H, T, T) per layer]
    Dropout, Linear
        |
    logits (B, T, K)

The BiLSTM tagger is that of Huang, Xu, Yu 2015, "Bidirectional LSTM-CRF Models for Sequence
Tagging", without the CRF: each position's tag is a softmax over ``W h_t``. The model
labels every position, subword pieces included; the task decides which positions count (the first
piece of each word, say) and the loss must ignore the rest and the padding.

The encoder is replaceable as in :class:`qkv.models.classifier.EncoderClassifier`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.config_values import check_positive_ints
from qkv.models.outputs import TaggerOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sequence_encoder import NestedTextEncoder, build_encoder

__all__ = ["PRESETS", "SequenceTagger", "SequenceTaggerConfig"]

# Named sizes (all of them live in qkv.models.presets); the vocabulary and the tag set come from
# the task.
PRESETS = TABLE["sequence_tagger"]


@dataclass(frozen=True)
class SequenceTaggerConfig(
    NestedTextEncoder, Presets, family="sequence_tagger", sizes=("vocab_size", "num_tags")
):
    """Sizes of a :class:`SequenceTagger`.

    Flat in a model section and in ``config.json``: :mod:`qkv.models.sequence_encoder`.

    Args:
        text: the text encoder's (:class:`TextEncoderConfig`: vocabulary, encoder, widths,
            dropout, ...); ``None`` beside ``bert``.
        num_tags: ``K``.
        bert: a BERT-family encoder instead of ``text``: its
            :class:`~qkv.models.bert.BertConfig` fields (a pretrained one, fine-tuned by the
            task).
        dropout: before the output layer; ``None``: the text encoder's (0.1 beside BERT).
    """

    text: TextEncoderConfig | None
    num_tags: int
    bert: dict[str, Any] | None = None
    dropout: float | None = None

    def __post_init__(self) -> None:
        self.check_encoder()
        check_positive_ints(self, ("num_tags",))


class SequenceTagger(nn.Module):
    """One label per position.

    Args:
        config: a :class:`SequenceTaggerConfig`.
        encoder: a ready-made encoder to use instead of building the config's;
            encoder_dim: its width ``D`` (default: its ``output_dim``).

    Shape:
        ``ids (B, T)`` right-padded, ``keep (B, T)`` boolean, ``True`` at real tokens (``None``:
        every token is real) -> ``logits (B, T, K)``; the logits at padded positions mean nothing.
    """

    def __init__(
        self,
        config: SequenceTaggerConfig,
        *,
        encoder: nn.Module | None = None,
        encoder_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.config = c = config
        self.encoder, width = build_encoder(c, encoder, encoder_dim)
        self.dropout = nn.Dropout(c.head_dropout)
        self.output_proj = nn.Linear(width, c.num_tags)

    def forward(
        self, ids: Tensor, *, keep: Tensor | None = None, need_weights: bool = False
    ) -> TaggerOutput:
        """Tag logits for every position of ``ids (B, T)``.

        Args:
            ids: ``(B, T)`` token ids, real tokens first.
            keep: ``(B, T)`` boolean, ``True`` at real tokens; ``None``: all real.
            need_weights: also return the encoder's attention maps, ``(B, H, T, T)`` per layer
                (the logits are the same either way).

        Returns:
            :class:`TaggerOutput` with ``logits (B, T, K)``.
        """
        if keep is None and ids.dim() == 2:
            keep = torch.ones_like(ids, dtype=torch.bool)
        encoded = self.encoder(ids, keep=keep, need_weights=need_weights)
        logits = self.output_proj(self.dropout(encoded.hidden))  # (B, T, K)
        return TaggerOutput(logits, list(encoded.attentions) if need_weights else None)

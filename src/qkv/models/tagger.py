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
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.classifier import build_encoder, check_encoder_fields, encoder_width
from qkv.models.outputs import TaggerOutput

__all__ = ["PRESETS", "SequenceTagger", "SequenceTaggerConfig"]

# Named sizes; the vocabulary and the tag set come from the task.
PRESETS: dict[str, dict[str, object]] = {
    "tiny": dict(d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0, max_len=64),
    "transformer-small": dict(d_model=256, num_heads=4, num_layers=4, d_ff=1024, max_len=512),
    # A BiLSTM tagger of Huang et al. 2015's size (300 units per direction), no CRF.
    "bilstm": dict(encoder="bilstm", d_model=600, num_layers=1, dropout=0.5, max_len=1024),
    "bilstm-attention": dict(
        encoder="bilstm",
        d_model=600,
        num_layers=1,
        dropout=0.5,
        max_len=1024,
        self_attention=True,
        num_heads=6,
    ),
}


@dataclass(frozen=True)
class SequenceTaggerConfig:
    """Sizes of a :class:`SequenceTagger`.

    Args:
        vocab_size: ``V``; num_tags: ``K``; pad_id: the padding id.
        encoder, d_model, num_heads, num_layers, d_ff, dropout, max_len, positions,
            self_attention, cell: the text encoder's (:class:`TextEncoderConfig`); ``dropout``
            also applies before the output layer.
        bert: with ``encoder="bert"``, the :class:`~qkv.models.bert.BertConfig` fields of a
            BERT encoder (a pretrained one, fine-tuned by the task).
    """

    PRESETS: ClassVar[dict[str, dict[str, object]]] = PRESETS

    vocab_size: int
    num_tags: int
    encoder: str = "transformer"
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 1024
    dropout: float = 0.1
    max_len: int = 512
    positions: str = "learned"
    self_attention: bool = False
    cell: str = "lstm"
    pad_id: int = 0
    bert: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        check_encoder_fields(self)
        tags = self.num_tags
        if not isinstance(tags, int) or isinstance(tags, bool) or tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {tags!r}")

    def encoder_config(self) -> TextEncoderConfig:
        """The text encoder's part of this config."""
        return TextEncoderConfig.from_fields(self)

    @classmethod
    def preset(
        cls, name: str, vocab_size: int, num_tags: int, **overrides: object
    ) -> SequenceTaggerConfig:
        """The sizes of preset ``name`` (see ``PRESETS``) with ``overrides`` on top."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
        values = {**PRESETS[name], **overrides}
        return cls(vocab_size=vocab_size, num_tags=num_tags, **values)  # type: ignore[arg-type]


class SequenceTagger(nn.Module):
    """One label per position.

    Args:
        config: a :class:`SequenceTaggerConfig`.
        encoder: a ready-made encoder to use instead of building ``config.encoder``;
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
        if encoder is None:
            self.encoder, width = build_encoder(c)
        else:
            self.encoder, width = encoder, encoder_width(encoder, encoder_dim)
        self.dropout = nn.Dropout(c.dropout)
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

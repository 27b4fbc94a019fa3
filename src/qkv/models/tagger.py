"""A sequence tagger: a text encoder and a linear layer giving one label per position.

    ids (B, T), keep (B, T)
        |
    text encoder: Transformer, or BiLSTM (+ self-attention)     (qkv.layers.text_encoder)
        |  hidden (B, T, D), attentions [(B, H, T, T) per layer]
    [concatenated with a casing embedding of each token's word shape (B, T, C)]
    Dropout, Linear
        |
    logits (B, T, K)
        |
    [a linear-chain CRF over the words' logits]                  (qkv.layers.crf)

The BiLSTM tagger is that of Huang, Xu, Yu 2015, "Bidirectional LSTM-CRF Models for Sequence
Tagging". Without a CRF each position's tag is a softmax over ``W h_t``; with one (``crf=True``,
Lample et al. 2016, "Neural Architectures for Named Entity Recognition") the logits are the
CRF's emission scores and a learned ``(K, K)`` transition matrix scores each pair of neighbouring
tags, so the model scores whole tag sequences. The model labels every position, subword pieces
included; the task decides which positions count (the first piece of each word, say), gathers
them into word-level scores and runs the loss and the decoding (softmax or
:attr:`SequenceTagger.crf`) there.

The casing feature (``casing_dim > 0``) concatenates an embedding of each token's word shape
(:mod:`qkv.data.labelled.word_shape`: lower, Title, UPPER, ...) to the encoder's output, so it
reaches the
output layer (and the CRF) whatever the encoder: an uncased pretrained encoder keeps its own
inputs and still sees case at the head.

The encoder is replaceable as in :class:`qkv.models.classifier.EncoderClassifier`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from qkv.config_values import check_bools, check_casing, check_positive_ints
from qkv.layers.crf import LinearChainCRF
from qkv.layers.text_encoder import TextEncoderConfig
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
            :class:`~qkv.models.bert.model.BertConfig` fields (a pretrained one, fine-tuned by the
            task).
        dropout: before the output layer; ``None``: the text encoder's (0.1 beside BERT).
        crf: score tag sequences with a linear-chain CRF over the logits (:attr:`crf`).
        casing_dim: width ``C`` of the casing embedding (0: none); num_shapes: the word shapes
            it embeds (the task sets it, from :data:`qkv.data.labelled.word_shape.SHAPES`).
    """

    text: TextEncoderConfig | None
    num_tags: int
    bert: dict[str, Any] | None = None
    dropout: float | None = None
    crf: bool = False
    casing_dim: int = 0
    num_shapes: int = 0

    def __post_init__(self) -> None:
        self.check_encoder()
        check_positive_ints(self, ("num_tags",))
        check_bools(self, ("crf",))
        check_casing(self)


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
        self.casing = nn.Embedding(c.num_shapes, c.casing_dim) if c.casing_dim else None
        self.dropout = nn.Dropout(c.head_dropout)
        self.output_proj = nn.Linear(width + c.casing_dim, c.num_tags)
        # The sequence score's transitions; the task runs its loss and decoding on word scores.
        self.crf = LinearChainCRF(c.num_tags) if c.crf else None

    def forward(
        self,
        ids: Tensor,
        *,
        keep: Tensor | None = None,
        shapes: Tensor | None = None,
        need_weights: bool = False,
    ) -> TaggerOutput:
        """Tag logits for every position of ``ids (B, T)``.

        Args:
            ids: ``(B, T)`` token ids, real tokens first.
            keep: ``(B, T)`` boolean, ``True`` at real tokens; ``None``: all real.
            shapes: ``(B, T)`` word-shape ids, needed exactly when ``casing_dim > 0``.
            need_weights: also return the encoder's attention maps, ``(B, H, T, T)`` per layer
                (the logits are the same either way).

        Returns:
            :class:`TaggerOutput` with ``logits (B, T, K)`` (with a CRF, its emission scores).
        """
        if keep is None and ids.dim() == 2:
            keep = torch.ones_like(ids, dtype=torch.bool)
        encoded = self.encoder(ids, keep=keep, need_weights=need_weights)
        hidden = encoded.hidden  # (B, T, D)
        if self.casing is not None:
            if shapes is None or shapes.shape != ids.shape:
                got = None if shapes is None else tuple(shapes.shape)
                raise ValueError(
                    f"this tagger reads word shapes (casing_dim={self.config.casing_dim}): pass "
                    f"shapes of ids' shape {tuple(ids.shape)}, got {got}"
                )
            hidden = torch.cat([hidden, self.casing(shapes)], dim=-1)  # (B, T, D + C)
        elif shapes is not None:
            raise ValueError("shapes given, but this tagger has no casing feature (casing_dim=0)")
        logits = self.output_proj(self.dropout(hidden))  # (B, T, K)
        return TaggerOutput(logits, list(encoded.attentions) if need_weights else None)

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
the loss ``CE + penalty_weight * ||A A^T - I||_F^2`` (section 2.2; the penalty is
``ClassifierOutput.penalty``, the coefficient ``config.penalty_weight``).
``"cls"`` pooling reads position 0: the task prepends a ``[CLS]`` token to every sequence (BERT,
Devlin et al. 2019).

The encoder is any module called as ``encoder(ids, *, keep, need_weights)`` that returns an
object with ``.hidden (B, T, D)`` and ``.attentions``. ``encoder="bert"`` builds a
:class:`~qkv.models.bert.BertEncoder` from the config's ``bert`` field (the architecture of the
pretrained encoder a task fine-tunes, e.g. all-MiniLM-L6-v2; the task loads its weights); any
other ready-made one can be passed as ``EncoderClassifier(config, encoder=..., encoder_dim=D)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from qkv.layers.pooling import POOLINGS, build_pooling
from qkv.layers.text_encoder import TextEncoderConfig, build_text_encoder
from qkv.models.bert import BertConfig, BertEncoder
from qkv.models.config_values import check_values
from qkv.models.outputs import ClassifierOutput
from qkv.models.sizes import check_parameters, recurrent_layers, transformer_layers

if TYPE_CHECKING:
    from qkv.models.tagger import SequenceTaggerConfig

__all__ = [
    "PRESETS",
    "EncoderClassifier",
    "EncoderClassifierConfig",
    "build_encoder",
    "encoder_width",
]

# Named sizes; the vocabulary and the labels come from the task.
PRESETS: dict[str, dict[str, object]] = {
    "tiny": dict(
        d_model=32,
        num_heads=2,
        num_layers=1,
        d_ff=64,
        dropout=0.0,
        max_len=64,
        pooling="mean",
        hops=2,
        attention_dim=16,
    ),
    "transformer-small": dict(
        d_model=256,
        num_heads=4,
        num_layers=4,
        d_ff=1024,
        max_len=512,
        pooling="cls",
    ),
    # Lin et al. 2017's sizes: u = 300 units per direction, d_a = 350, r = 30, penalty weight 1.
    "bilstm-attention": dict(
        encoder="bilstm",
        d_model=600,
        num_layers=1,
        dropout=0.5,
        max_len=1024,
        pooling="structured",
        hops=30,
        attention_dim=350,
        penalty_weight=1.0,
    ),
}


@dataclass(frozen=True)
class EncoderClassifierConfig:
    """Sizes of an :class:`EncoderClassifier`.

    Args:
        vocab_size: ``V``; num_labels: ``K``; pad_id: the padding id.
        encoder, d_model, num_heads, num_layers, d_ff, dropout, max_len, positions,
            self_attention, cell: the text encoder's (:class:`TextEncoderConfig`); ``dropout``
            also applies to the pooled vector.
        pooling: ``"cls"`` (position 0, a prepended ``[CLS]``), ``"mean"``, ``"max"``,
            ``"attention"`` (one learned additive query) or ``"structured"`` (Lin et al. 2017).
        hops: ``r`` of structured pooling; attention_dim: the hidden width of the attention and
            structured poolings' scores (``d_a``).
        penalty_weight: the coefficient of the structured penalty in the training loss (the
            other poolings return no penalty).
        bert: with ``encoder="bert"``, the :class:`~qkv.models.bert.BertConfig` fields of the
            encoder (its other encoder fields are then unused).
    """

    PRESETS: ClassVar[dict[str, dict[str, object]]] = PRESETS

    vocab_size: int
    num_labels: int
    encoder: str = "transformer"
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 1024
    dropout: float = 0.1
    max_len: int = 512
    positions: str = "learned"
    pooling: str = "cls"
    hops: int = 1
    attention_dim: int = 128
    penalty_weight: float = 0.0
    self_attention: bool = False
    cell: str = "lstm"
    pad_id: int = 0
    bert: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        check_encoder_fields(self)
        for name in ("num_labels", "hops", "attention_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        weight = self.penalty_weight
        if not isinstance(weight, int | float) or not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"penalty_weight must be a finite number >= 0, got {weight!r}")

    def encoder_config(self) -> TextEncoderConfig:
        """The text encoder's part of this config."""
        return TextEncoderConfig.from_fields(self)

    @classmethod
    def preset(
        cls, name: str, vocab_size: int, num_labels: int, **overrides: object
    ) -> EncoderClassifierConfig:
        """The sizes of preset ``name`` (see ``PRESETS``) with ``overrides`` on top."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
        values = {**PRESETS[name], **overrides}
        return cls(vocab_size=vocab_size, num_labels=num_labels, **values)  # type: ignore[arg-type]


def check_encoder_fields(config: EncoderClassifierConfig | SequenceTaggerConfig) -> None:
    """Validate a classifier's or tagger's encoder fields: the BERT config when
    ``encoder="bert"`` (its vocabulary must be the model's), else the text encoder's."""
    if config.encoder != "bert":
        if config.bert is not None:
            raise ValueError(f"bert is set, but encoder={config.encoder!r} (expected 'bert')")
        config.encoder_config()
        d, layers = config.d_model, config.num_layers
        if config.encoder == "transformer":
            stack = transformer_layers(layers, d, config.d_ff)
        else:  # two directions of d_model / 2
            stack = 2 * recurrent_layers(layers, d, max(d // 2, 1))
        check_parameters(
            config,
            (config.vocab_size + config.max_len) * d + stack,
            ("vocab_size", "max_len", "d_model", "d_ff", "num_layers"),
        )
        return
    if not isinstance(config.bert, dict):
        raise ValueError("encoder='bert' needs bert: the BertConfig fields of the encoder")
    check_values(BertConfig, config.bert, "bert")
    unknown = sorted(set(config.bert) - {f.name for f in dataclasses.fields(BertConfig)})
    if unknown:
        raise ValueError(f"bert has unknown BertConfig field(s) {', '.join(unknown)}")
    bert = BertConfig(**config.bert)
    if bert.vocab_size != config.vocab_size:
        raise ValueError(
            f"vocab_size={config.vocab_size} differs from the BERT encoder's {bert.vocab_size}"
        )


def build_encoder(config: EncoderClassifierConfig | SequenceTaggerConfig) -> tuple[nn.Module, int]:
    """The encoder a classifier's or tagger's config names, and the width ``D`` of its states.

    Every encoder is called as ``encoder(ids, *, keep, need_weights)`` and returns an object with
    ``.hidden (B, T, D)`` and ``.attentions``; a new kind of encoder is one more case here.
    """
    if config.encoder == "bert":
        bert = BertConfig(**config.bert)  # type: ignore[arg-type]
        return BertEncoder(bert), bert.hidden_size
    encoder = build_text_encoder(config.encoder_config())
    return encoder, encoder.output_dim


def encoder_width(encoder: nn.Module, encoder_dim: int | None) -> int:
    """The width ``D`` of a ready-made encoder's states: ``encoder_dim``, else its
    ``output_dim`` attribute."""
    own = getattr(encoder, "output_dim", None)
    width = own if encoder_dim is None else encoder_dim
    if not isinstance(width, int) or width < 1:
        raise ValueError(
            f"pass encoder_dim, the width of {type(encoder).__name__}'s states "
            f"(got encoder_dim={encoder_dim!r}, output_dim={own!r})"
        )
    return width


class EncoderClassifier(nn.Module):
    """Labels for whole sequences.

    Args:
        config: an :class:`EncoderClassifierConfig`.
        encoder: a ready-made encoder to use instead of building ``config.encoder`` (the config's
            encoder fields are then unused); encoder_dim: its width ``D`` (default: its
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
        if encoder is None:
            self.encoder, width = build_encoder(c)
        else:
            self.encoder, width = encoder, encoder_width(encoder, encoder_dim)
        self.pooling = build_pooling(c.pooling, width, attention_dim=c.attention_dim, hops=c.hops)
        self.dropout = nn.Dropout(c.dropout)
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

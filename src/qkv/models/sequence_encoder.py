"""The encoder under the sequence classifier and the sequence tagger: the part of their configs
they share, its checks, building it, and the flat model section.

The encoder is qkv's own text encoder (:class:`~qkv.layers.text_encoder.TextEncoderConfig`: a
Transformer, or a BiLSTM with optional self-attention) or a BERT-family encoder (the fields of a
:class:`~qkv.models.bert.model.BertConfig`: the architecture of a pretrained encoder the task
fine-tunes, e.g. all-MiniLM-L6-v2). Both configs nest it as ``text`` or ``bert``, beside their
own head's fields, and inherit :class:`NestedTextEncoder`.

A run configuration's model section is flat, and so is a trained model's ``config.json``:

    flat    {vocab_size, encoder, d_model, ..., dropout, ..., pad_id,  bert,  <the head's keys>}
    nested  text = TextEncoderConfig(vocab_size, encoder, ..., pad_id)   when encoder != "bert"
            bert = {BertConfig fields}   (vocab_size must be the BERT's)  when encoder == "bert"
            dropout = the head's: None (the text encoder's) or, beside BERT, the flat dropout

Beside a BERT encoder the text encoder's other flat keys mean nothing; the nested config drops
them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from torch import nn

from qkv.config_values import check_fractions, check_values, field_hints
from qkv.layers.text_encoder import TextEncoderConfig, build_text_encoder
from qkv.models.bert.model import BertConfig, BertEncoder
from qkv.models.sizes import check_parameters, recurrent_layers, transformer_layers

__all__ = ["NestedTextEncoder", "build_encoder", "check_bert"]

TEXT_KEYS = tuple(f.name for f in dataclasses.fields(TextEncoderConfig))
# The head's dropout beside a BERT encoder when none is given: the flat default (a dataclass
# keeps a field's default on the class).
DEFAULT_DROPOUT: float = TextEncoderConfig.dropout
NESTED = ("text", "dropout")  # fields of the nested config that the flat form spells otherwise

ConfigT = TypeVar("ConfigT", bound="NestedTextEncoder")


class NestedTextEncoder:
    """What a config with the fields ``text: TextEncoderConfig | None``, ``bert: dict | None``
    and ``dropout: float | None`` (its head's) gets: which encoder it names, their checks, and
    its flat form (:mod:`qkv.config_values`)."""

    if TYPE_CHECKING:  # the config's own fields (annotated here, they would be the mixin's)
        text: TextEncoderConfig | None
        bert: dict[str, Any] | None
        dropout: float | None
        # ... and what its dataclass provides: the fields, and a constructor taking text first.
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

        def __init__(self, text: TextEncoderConfig | None, **fields: Any) -> None: ...

    @property
    def encoder(self) -> str:
        """``"transformer"``, ``"bilstm"`` or ``"bert"``: the flat form's ``encoder``."""
        return "bert" if self.text is None else self.text.encoder

    @property
    def attends(self) -> bool:
        """Whether the encoder has self-attention layers (BERT's, a Transformer's, a BiLSTM's
        self-attention layer), whose weights its ``attentions`` are."""
        return self.text is None or self.text.attends

    @property
    def vocab_size(self) -> int:
        """``V`` of the encoder."""
        return self.text.vocab_size if self.text is not None else self.bert_config().vocab_size

    @property
    def head_dropout(self) -> float:
        """The dropout before the output layer: ``dropout``; if ``None``, the text encoder's
        (``DEFAULT_DROPOUT`` beside a BERT encoder)."""
        if self.dropout is not None:
            return self.dropout
        return self.text.dropout if self.text is not None else DEFAULT_DROPOUT

    def bert_config(self) -> BertConfig:
        """The BERT encoder's config (``bert`` must be set)."""
        return BertConfig(**(self.bert or {}))

    def check_encoder(self) -> None:
        """Validate ``text`` or ``bert`` (exactly one of them) and ``dropout``; the text
        encoder's sizes must fit in memory (:mod:`qkv.models.sizes`)."""
        text, bert = self.text, self.bert
        if (text is None) == (bert is None):
            raise ValueError(
                "give text (a TextEncoderConfig) or bert (the BertConfig fields of a BERT-family "
                f"encoder), exactly one; got text={text!r}, bert={bert!r}"
            )
        if self.dropout is not None:
            check_fractions(self, ("dropout",))
        if bert is not None:
            check_bert(bert)
            return
        if not isinstance(text, TextEncoderConfig):
            raise ValueError(f"text must be a TextEncoderConfig, got {type(text).__name__}")
        d, layers = text.d_model, text.num_layers
        if text.encoder == "transformer":
            stack = transformer_layers(layers, d, text.d_ff)
        else:  # two directions of d_model / 2
            stack = 2 * recurrent_layers(layers, d, max(d // 2, 1))
        check_parameters(
            text,
            (text.vocab_size + text.max_len) * d + stack,
            ("vocab_size", "max_len", "d_model", "d_ff", "num_layers"),
        )

    @classmethod
    def from_flat(cls: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
        """The config from its flat form (see the module's docstring)."""
        own = dict(values)
        text = {key: own.pop(key) for key in TEXT_KEYS if key in own}
        encoder = text.get("encoder", "transformer")
        if encoder != "bert":
            if own.get("bert") is not None:
                raise ValueError(f"bert is set, but encoder={encoder!r} (expected 'bert')")
            return cls(TextEncoderConfig(**text), **own)
        if not isinstance(own.get("bert"), dict):
            raise ValueError("encoder='bert' needs bert: the BertConfig fields of the encoder")
        config = cls(None, dropout=text.get("dropout"), **own)
        if "vocab_size" in text and text["vocab_size"] != config.vocab_size:
            raise ValueError(
                f"vocab_size={text['vocab_size']} differs from the BERT encoder's "
                f"{config.vocab_size}"
            )
        return config

    def to_flat(self) -> dict[str, Any]:
        """The flat form, from which :meth:`from_flat` builds this config again."""
        flat = dataclasses.asdict(self)
        text, dropout = (flat.pop(name) for name in NESTED)
        if text is None:
            encoder = {"vocab_size": self.vocab_size, "encoder": "bert"}
            return {**encoder, "dropout": self.head_dropout, **flat}
        if dropout is not None and dropout != text["dropout"]:
            raise ValueError(
                f"dropout={dropout} differs from the text encoder's {text['dropout']}; a flat "
                "model section has one dropout for both"
            )
        return {**text, **flat}

    @classmethod
    def flat_fields(cls) -> dict[str, Any]:
        """The keys of the flat form and the annotation of each."""
        own = {k: v for k, v in field_hints(cls).items() if k not in NESTED}
        return {**field_hints(TextEncoderConfig), **own}


def check_bert(bert: Any) -> None:
    """Validate the ``BertConfig`` fields of a BERT encoder."""
    if not isinstance(bert, dict):
        raise ValueError(f"bert must be a mapping of BertConfig fields, got {bert!r}")
    hints = field_hints(BertConfig)
    check_values(hints, bert, "bert")
    unknown = sorted(set(bert) - set(hints))
    if unknown:
        raise ValueError(f"bert has unknown BertConfig field(s) {', '.join(unknown)}")
    BertConfig(**bert)


def build_encoder(
    config: NestedTextEncoder, encoder: nn.Module | None = None, encoder_dim: int | None = None
) -> tuple[nn.Module, int]:
    """The encoder of a classifier or tagger and the width ``D`` of its states: a ready-made
    ``encoder`` (its width ``encoder_dim``, else its ``output_dim``), or the one the config
    names.

    Every encoder is called as ``encoder(ids, *, keep, need_weights)`` and returns an object with
    ``.hidden (B, T, D)`` and ``.attentions``; a new kind of encoder is one more case here.
    """
    if encoder is not None:
        own = getattr(encoder, "output_dim", None)
        width = own if encoder_dim is None else encoder_dim
        if not isinstance(width, int) or width < 1:
            raise ValueError(
                f"pass encoder_dim, the width of {type(encoder).__name__}'s states "
                f"(got encoder_dim={encoder_dim!r}, output_dim={own!r})"
            )
        return encoder, width
    if config.text is None:
        bert = config.bert_config()
        return BertEncoder(bert), bert.hidden_size
    built = build_text_encoder(config.text)
    return built, built.output_dim

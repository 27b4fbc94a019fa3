"""Model families: a family is a (config class, model class) pair, named in a run
configuration's ``model.family``.

The family's config is built from a flat dict, the ``model`` section of a run configuration or
a trained model's ``config.json`` (:func:`build_config`), and written back to the same flat
dict (:func:`config_to_dict`); :func:`model_fields` lists the flat keys of each family with their
types, and :func:`check_model_values` checks a section against them, unknown keys included. A
family's named presets (``preset: tiny``) are in one table, :mod:`qkv.models.presets`, which the
CLI, the studies and the tests share.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from torch import nn

from qkv.config_values import check_values, config_from_flat, flat_fields, flat_values


class _Families(Mapping[str, tuple[type, type[nn.Module]]]):
    """Family name -> ``(config class, model class)``, each family's module imported when it
    is first asked for, so that checking a YAML file's model section imports one family."""

    def __init__(self, table: dict[str, tuple[str, str, str]]) -> None:
        self._table = table

    def __getitem__(self, family: str) -> tuple[type, type[nn.Module]]:
        module, config, model = self._table[family]
        loaded = importlib.import_module(module)
        return getattr(loaded, config), getattr(loaded, model)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


FAMILIES = _Families(
    {
        "bert": ("qkv.models.bert.model", "BertConfig", "BertEncoder"),
        "cloze_reader": ("qkv.models.cloze_reader", "ClozeReaderConfig", "ClozeReader"),
        "encoder_classifier": (
            "qkv.models.classifier",
            "EncoderClassifierConfig",
            "EncoderClassifier",
        ),
        "encoder_span_reader": (
            "qkv.models.encoder_span_reader",
            "EncoderSpanReaderConfig",
            "EncoderSpanReader",
        ),
        "seq2seq_rnn": ("qkv.models.seq2seq_rnn", "Seq2SeqRNNConfig", "Seq2SeqRNN"),
        "sequence_tagger": ("qkv.models.tagger", "SequenceTaggerConfig", "SequenceTagger"),
        "show_attend_tell": (
            "qkv.models.show_attend_tell.model",
            "ShowAttendTellConfig",
            "ShowAttendTell",
        ),
        "span_reader": ("qkv.models.span_reader", "SpanReaderConfig", "SpanReader"),
        "transformer": ("qkv.models.transformer.model", "TransformerConfig", "Transformer"),
        "transformer_lm": (
            "qkv.models.language_model.model",
            "TransformerLMConfig",
            "TransformerLM",
        ),
        "vit": ("qkv.models.vit", "ViTConfig", "ViT"),
    }
)


def _config_class(family: Any) -> type:
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; known: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[family][0]


def model_fields(family: str) -> dict[str, Any]:
    """The keys of ``family``'s flat model section and the type annotation of each (what
    :func:`~qkv.config_values.check_values` checks a value against); the classifier's
    and tagger's include their text encoder's keys (``d_model``, ``encoder``...)."""
    return flat_fields(_config_class(family))


def check_model_values(
    family: str, values: Mapping[Any, Any], *, extra: Iterable[str] = ()
) -> None:
    """Raise ``ValueError`` unless every key of the flat model section ``values`` is one of
    ``family``'s (or of ``extra``: keys the caller reads itself) and its value fits the key's
    type; an unknown key is named with the closest known one (``d_modle (did you mean
    d_model?)``). Ranges are checked when the config is built."""
    fields = model_fields(family)
    check_values(fields, values, "model")
    known = sorted(set(fields) | set(extra))
    unknown = sorted(set(values) - set(known))
    if unknown:
        named = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            named.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise ValueError(
            f"unknown {family} option(s) {', '.join(named)}; known: {', '.join(known)}"
        )


def build_config(family: str, values: Mapping[str, Any]) -> Any:
    """The family's frozen config from its flat form (the ``model`` section of a run
    configuration, a trained model's ``config.json``); unknown keys are an error naming the
    known ones, a value of the wrong type one naming ``model.KEY`` and the value."""
    config_cls = _config_class(family)
    check_model_values(family, values)
    try:
        return config_from_flat(config_cls, values)
    except TypeError as error:  # a required size missing
        raise ValueError(f"{family} model: {error}") from None


def build_model(family: str, config: Any) -> nn.Module:
    return FAMILIES[family][1](config)


def family_of(config: Any) -> str:
    for name, (config_cls, _) in FAMILIES.items():
        if isinstance(config, config_cls):
            return name
    raise ValueError(f"{type(config).__name__} is not the config of a registered model family")


def config_to_dict(config: Any) -> dict[str, Any]:
    """The flat form of ``config``, which :func:`build_config` reads back (``config.json``)."""
    return flat_values(config)

"""Model families and named presets.

A family is a (config class, model class) pair; a preset is a named set of config values for a
family, kept in one place so that the CLI, the studies and the tests share them.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from torch import nn

from qkv.models.bert import BertConfig, BertEncoder
from qkv.models.classifier import EncoderClassifier, EncoderClassifierConfig
from qkv.models.config_values import check_values
from qkv.models.language_model import TransformerLM, TransformerLMConfig
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.models.show_attend_tell import ShowAttendTell, ShowAttendTellConfig
from qkv.models.tagger import SequenceTagger, SequenceTaggerConfig
from qkv.models.transformer import Transformer, TransformerConfig
from qkv.models.vit import ViT, ViTConfig

FAMILIES: dict[str, tuple[type, type[nn.Module]]] = {
    "bert": (BertConfig, BertEncoder),
    "encoder_classifier": (EncoderClassifierConfig, EncoderClassifier),
    "seq2seq_rnn": (Seq2SeqRNNConfig, Seq2SeqRNN),
    "sequence_tagger": (SequenceTaggerConfig, SequenceTagger),
    "show_attend_tell": (ShowAttendTellConfig, ShowAttendTell),
    "transformer": (TransformerConfig, Transformer),
    "transformer_lm": (TransformerLMConfig, TransformerLM),
    "vit": (ViTConfig, ViT),
}


def build_config(family: str, values: dict[str, Any]) -> Any:
    """The family's frozen config from a dict (the ``model`` section of a run configuration);
    unknown keys are an error naming the known ones, a value of the wrong type one naming
    ``model.KEY`` and the value."""
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; known: {', '.join(sorted(FAMILIES))}")
    config_cls, _ = FAMILIES[family]
    check_values(config_cls, values, "model")
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        named = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            named.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise ValueError(
            f"unknown {family} option(s) {', '.join(named)}; known: {', '.join(sorted(known))}"
        )
    try:
        return config_cls(**values)
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
    return dataclasses.asdict(config)

"""The registry reads and writes every family's flat model section: the classifier's and the
tagger's configs nest their text encoder, their sections and saved ``config.json`` files stay
flat; the flat keys of each family check a section, typos included, before anything is built."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import qkv.models
from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.classifier import EncoderClassifier, EncoderClassifierConfig
from qkv.models.registry import (
    FAMILIES,
    build_config,
    build_model,
    check_model_values,
    config_to_dict,
    model_fields,
)
from qkv.models.tagger import SequenceTaggerConfig

# A classifier's and a tagger's flat keys, as every config.json before the nesting spelled them.
TEXT_KEYS = {"vocab_size", "encoder", "d_model", "num_heads", "num_layers", "d_ff", "dropout",
             "max_len", "positions", "self_attention", "cell", "pad_id", "bert"}  # fmt: skip
CLASSIFIER_KEYS = TEXT_KEYS | {"num_labels", "pooling", "hops", "attention_dim"}
BERT = {"vocab_size": 32, "hidden_size": 8, "num_layers": 1, "num_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 16}  # fmt: skip
# The model section of a classifier's config.json as qkv wrote it before the nesting (less
# penalty_weight, a weight of the loss that the task layer moves to train.penalty_weight).
SAVED = {
    "vocab_size": 50, "num_labels": 3, "encoder": "bilstm", "d_model": 32, "num_heads": 2,
    "num_layers": 1, "d_ff": 64, "dropout": 0.2, "max_len": 64, "positions": "learned",
    "pooling": "structured", "hops": 2, "attention_dim": 16,
    "self_attention": True, "cell": "gru", "pad_id": 0, "bert": None,
}  # fmt: skip


def test_the_flat_keys_of_every_family():
    assert set(model_fields("encoder_classifier")) == CLASSIFIER_KEYS
    assert set(model_fields("sequence_tagger")) == TEXT_KEYS | {
        "num_tags", "crf", "casing_dim", "num_shapes",
    }  # fmt: skip
    assert model_fields("sequence_tagger")["d_model"] is int
    assert set(model_fields("encoder_span_reader")) == TEXT_KEYS | {
        "max_answer_length", "casing_dim", "num_shapes",
    }  # fmt: skip
    nested = {"encoder_classifier", "sequence_tagger", "encoder_span_reader"}
    for family in set(FAMILIES) - nested:
        fields = {f.name for f in dataclasses.fields(FAMILIES[family][0])}
        assert set(model_fields(family)) == fields, family
    with pytest.raises(ValueError, match="unknown model family 'gpt'; known: bert, "):
        model_fields("gpt")


def test_a_saved_flat_config_loads_into_the_nested_one_and_is_written_back_the_same():
    config = build_config("encoder_classifier", SAVED)
    assert config.text == TextEncoderConfig(
        50, "bilstm", 32, 2, 1, 64, 0.2, 64, "learned", self_attention=True, cell="gru"
    )
    assert (config.num_labels, config.pooling, config.hops, config.head_dropout) == (
        3,
        "structured",
        2,
        0.2,
    )
    assert config_to_dict(config) == SAVED
    nested = EncoderClassifierConfig(config.text, 3, "structured", 2, 16)
    assert nested == config and isinstance(
        build_model("encoder_classifier", nested), EncoderClassifier
    )
    tagger = {key: SAVED[key] for key in TEXT_KEYS} | {
        "num_tags": 9, "crf": True, "casing_dim": 8, "num_shapes": 11,
    }  # fmt: skip
    assert config_to_dict(build_config("sequence_tagger", tagger)) == tagger


def test_a_bert_encoder_keeps_its_fields_and_drops_the_unused_text_encoder_keys():
    saved = {**SAVED, "vocab_size": 32, "encoder": "bert", "bert": BERT}
    config = build_config("encoder_classifier", saved)
    assert config.text is None and config.bert == BERT and config.encoder == "bert"
    assert (config.vocab_size, config.head_dropout) == (32, 0.2)
    flat = config_to_dict(config)
    unused = {"d_model", "num_heads", "num_layers", "d_ff", "max_len", "positions",
              "self_attention", "cell", "pad_id"}  # fmt: skip
    assert flat == {key: value for key, value in saved.items() if key not in unused}
    assert build_config("encoder_classifier", flat) == config
    tagger = build_config("sequence_tagger", {"vocab_size": 32, "num_tags": 2,
                                              "encoder": "bert", "bert": BERT})  # fmt: skip
    assert tagger.head_dropout == 0.1 and config_to_dict(tagger)["dropout"] == 0.1


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"encoder": "bert"}, "encoder='bert' needs bert: the BertConfig fields"),
        ({"bert": BERT}, r"bert is set, but encoder='transformer' \(expected 'bert'\)"),
        ({"encoder": "bert", "bert": BERT, "vocab_size": 31},
         "vocab_size=31 differs from the BERT encoder's 32"),
        ({"encoder": "bert", "bert": {**BERT, "num_heads": 3}},
         "hidden_size=8 is not divisible by num_heads=3"),
    ],
)  # fmt: skip
def test_the_flat_form_names_a_bad_encoder(values, message):
    with pytest.raises(ValueError, match=message):
        build_config("sequence_tagger", {"vocab_size": 32, "num_tags": 2, **values})


def test_the_nested_config_takes_one_encoder_and_flattens_only_what_it_can_say():
    text = TextEncoderConfig(32, d_model=16, num_heads=2, dropout=0.1)
    with pytest.raises(ValueError, match=r"give text .* or bert .*, exactly one"):
        SequenceTaggerConfig(None, 2)
    with pytest.raises(ValueError, match=r"give text .* or bert .*, exactly one"):
        SequenceTaggerConfig(text, 2, bert=BERT)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 2.0"):
        SequenceTaggerConfig(text, 2, dropout=2.0)
    config = SequenceTaggerConfig(text, 2, dropout=0.3)  # the head's own dropout
    assert config.head_dropout == 0.3
    with pytest.raises(ValueError, match=r"dropout=0\.3 differs from the text encoder's 0\.1"):
        config_to_dict(config)


@pytest.mark.parametrize("family", ["encoder_classifier", "sequence_tagger", "transformer_lm"])
def test_a_model_section_typo_is_named_with_the_closest_key(family):
    with pytest.raises(ValueError) as error:
        check_model_values(family, {"d_modle": 64, "vocab_size": 8})
    message = str(error.value)
    assert message.startswith(
        f"unknown {family} option(s) d_modle (did you mean d_model?); known: "
    )
    assert "d_model" in message.split("known: ")[1]


def test_a_model_section_is_checked_with_the_callers_own_keys():
    section = {"preset": "tiny", "pretrained": "minilm", "pooling": "mean", "d_model": 32}
    check_model_values("encoder_classifier", section, extra={"preset", "pretrained"})
    with pytest.raises(ValueError, match=r"unknown encoder_classifier option.* preset"):
        check_model_values("encoder_classifier", section)
    with pytest.raises(ValueError, match=r"model\.d_model must be an integer, got '32' \(str\)"):
        check_model_values("sequence_tagger", {"d_model": "32"})
    with pytest.raises(ValueError, match=r"model\.self_attention must be true or false, got 1"):
        check_model_values("sequence_tagger", {"self_attention": 1})
    with pytest.raises(
        ValueError, match=r"model has the key 3 \(int\).* such as model\.vocab_size"
    ):
        check_model_values("encoder_classifier", {3: 4})


def test_the_classifier_and_the_tagger_do_not_import_each_other():
    root = Path(qkv.models.__file__).parent
    for name, other in (("classifier", "tagger"), ("tagger", "classifier")):
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert f"qkv.models.{other}" not in imported, name

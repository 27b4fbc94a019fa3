"""One preset table for every family, one expansion of a model section's ``preset``, one
``preset()`` constructor shared by the config classes; the range checks every config shares."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import pytest

from qkv.config_values import check_choice, check_fractions, check_positive_ints
from qkv.models.bert.model import BertConfig
from qkv.models.classifier import EncoderClassifierConfig
from qkv.models.language_model.model import TransformerLMConfig
from qkv.models.presets import PRESETS, preset_values, with_preset
from qkv.models.registry import FAMILIES, build_config
from qkv.models.tagger import SequenceTaggerConfig
from qkv.models.vit import ViTConfig

MODULES = {
    "bert": "qkv.models.bert.model",
    "encoder_classifier": "qkv.models.classifier",
    "sequence_tagger": "qkv.models.tagger",
    "transformer_lm": "qkv.models.language_model.model",
    "vit": "qkv.models.vit",
    "show_attend_tell": "qkv.models.show_attend_tell.model",
    "cloze_reader": "qkv.models.cloze_reader",
    "span_reader": "qkv.models.span_reader",
}
# What a task fills in from its data, per family.
TASK_SIZES = {
    "bert": {},
    "encoder_classifier": {"vocab_size": 50, "num_labels": 3},
    "sequence_tagger": {"vocab_size": 50, "num_tags": 4},
    "transformer_lm": {"vocab_size": 50},
    "vit": {},
    "show_attend_tell": {"vocab_size": 13, "tile_height": 16, "tile_width": 16},
    "cloze_reader": {"vocab_size": 50},
    "span_reader": {"vocab_size": 50},
}


@pytest.mark.parametrize("family", list(MODULES))
def test_each_family_reads_its_part_of_the_one_table(family):
    module = importlib.import_module(MODULES[family])
    assert module.PRESETS is PRESETS[family]
    config_cls = FAMILIES[family][0]  # (Show-Attend-Tell's class has no PRESETS yet)
    assert getattr(config_cls, "PRESETS", PRESETS[family]) is PRESETS[family]


@pytest.mark.parametrize(
    ("family", "name"), [(f, n) for f in MODULES for n in PRESETS[f]], ids=lambda x: str(x)
)
def test_every_preset_builds_through_the_model_section(family, name):
    values = {**with_preset(family, {"preset": name}), **TASK_SIZES[family]}
    config = build_config(family, values)
    assert isinstance(config, FAMILIES[family][0])


def test_with_preset_puts_the_preset_under_the_sections_own_keys():
    section = {"preset": "tiny", "d_model": 48, "num_layers": 3}
    values = with_preset("transformer_lm", section)
    assert values == {**PRESETS["transformer_lm"]["tiny"], "d_model": 48, "num_layers": 3}
    assert "preset" not in values and section["preset"] == "tiny"  # the section is not changed
    assert with_preset("transformer_lm", {"d_model": 8}) == {"d_model": 8}
    values["num_heads"] = 99
    assert PRESETS["transformer_lm"]["tiny"]["num_heads"] == 4  # a copy, never the table


@pytest.mark.parametrize("name", ["huge", 3, ["tiny"]])
def test_an_unknown_preset_names_the_known_ones(name):
    known = ", ".join(PRESETS["sequence_tagger"])
    with pytest.raises(ValueError) as error:
        with_preset("sequence_tagger", {"preset": name})
    assert str(error.value) == f"unknown model.preset {name!r}; known: {known}"
    with pytest.raises(ValueError, match=r"unknown preset 'huge'; known: tiny, "):
        preset_values("sequence_tagger", "huge")
    with pytest.raises(ValueError, match=r"unknown model.preset 'tiny'; known: $"):
        with_preset("transformer", {"preset": "tiny"})  # a family without presets


def test_the_shared_preset_constructor_takes_each_familys_sizes_in_order():
    lm = TransformerLMConfig.preset("tiny", 77, max_len=32)
    assert (lm.vocab_size, lm.max_len, lm.d_model) == (77, 32, 64)
    tagger = SequenceTaggerConfig.preset("bilstm", 50, 7)
    assert (tagger.vocab_size, tagger.num_tags, tagger.encoder) == (50, 7, "bilstm")
    assert tagger.text.d_model == 600 and tagger.head_dropout == 0.5
    classifier = EncoderClassifierConfig.preset("tiny", 50, 2, pooling="max")
    assert (classifier.num_labels, classifier.pooling, classifier.hops) == (2, "max", 2)
    assert BertConfig.preset("tiny").hidden_size == 32
    assert ViTConfig.preset("tiny", num_labels=0).num_labels == 0
    with pytest.raises(TypeError, match=r"takes 1 size\(s\) after the name \(vocab_size\), got 2"):
        TransformerLMConfig.preset("tiny", 77, 3)
    with pytest.raises(TypeError, match=r"takes 0 size\(s\) after the name \(none\), got 1"):
        ViTConfig.preset("tiny", 5)
    with pytest.raises(TypeError, match="got vocab_size twice"):
        TransformerLMConfig.preset("tiny", 77, vocab_size=78)


@dataclass(frozen=True)
class Sizes:
    width: int = 1
    depth: object = 1
    dropout: object = 0.0
    kind: str = "a"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"width": 0}, "width must be a positive int, got 0"),
        ({"depth": 2.0}, "depth must be a positive int, got 2.0"),
        ({"depth": True}, "depth must be a positive int, got True"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\), got -0.1"),
        ({"dropout": float("nan")}, r"dropout must be in \[0, 1\), got nan"),
        ({"dropout": "0.1"}, r"dropout must be in \[0, 1\), got '0.1'"),
        ({"kind": "c"}, r"kind must be one of \('a', 'b'\), got 'c'"),
    ],
)
def test_the_shared_range_checks_name_the_field_and_the_value(values, message):
    config = Sizes(**values)
    with pytest.raises(ValueError, match=message):
        check_positive_ints(config, ("width", "depth"))
        check_fractions(config, ("dropout",))
        check_choice("kind", config.kind, ("a", "b"))


def test_the_shared_range_checks_pass_good_values():
    config = Sizes(width=3, depth=2, dropout=0, kind="b")
    check_positive_ints(config, ("width", "depth"))
    check_fractions(config, ("dropout",))
    check_choice("kind", config.kind, ("a", "b"))
    with pytest.raises(ValueError, match=r"activation must be one of \['gelu', 'relu'\]"):
        check_choice("activation", "swish", sorted({"relu", "gelu"}))

"""Run configurations: typos get a suggestion, wrong types name the key and the expected type."""

import pytest
import yaml

from qkv.tasks.run_config import load_run_config, run_config_from_dict

CONFIG = "configs/tiny/reverse-transformer.yaml"


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.lr_rate=1", "train.lr_rate (did you mean train.lr?)"),
        ("decode.beam_sise=2", "decode.beam_sise (did you mean decode.beam_size?)"),
        ("train.nonsense=2", "unknown key(s) train.nonsense; known:"),
        ("train.lr=fast", "train.lr must be a number, got 'fast' (str)"),
        ("train.max_steps=1.5", "train.max_steps must be an integer, got 1.5 (float)"),
        ("data.vocab_size=true", "data.vocab_size must be an integer, got True (bool)"),
        ("train.snapshot_minutes=5", "train.snapshot_minutes must be a list of numbers, got 5"),
        ("train.adam_betas=[0.9]", "train.adam_betas must be a list of 2 numbers"),
        ("train.patience=soon", "train.patience must be an integer or null"),
        ("data.shared_vocab=1", "data.shared_vocab must be true or false"),
        ("train.clock=sundial", "train.clock must be one of wall, cpu"),
    ],
)
def test_bad_values_name_the_key_and_what_was_expected(override, message):
    with pytest.raises(ValueError) as error:
        load_run_config(CONFIG, [override])
    assert message in str(error.value)


def test_well_typed_values_pass_and_ints_count_as_numbers():
    config = load_run_config(
        CONFIG, ["train.lr=1", "train.max_minutes=null", "train.snapshot_minutes=[1, 2.5]"]
    )
    assert config.train.lr == 1 and config.train.max_minutes is None
    assert config.train.snapshot_minutes == (1.0, 2.5)


def test_model_typos_get_a_suggestion():
    from qkv.models.registry import build_config

    with pytest.raises(ValueError, match=r"d_modl \(did you mean d_model\?\)"):
        build_config("transformer", {"d_modl": 8})


def _translation(**changes):
    raw = {
        "task": "translation",
        "data": {"corpus": "reverse", "vocab_size": 32},
        "model": {"family": "transformer", "d_model": 16},
        "train": {"max_steps": 2},
    }
    raw.update(changes)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_translation(model=[1, 2]), "section 'model' must be a mapping of model.KEY: value"),
        (_translation(train={1: 3}), "train has the key 1 (int); its keys are setting names"),
        (_translation(data=[1]), "section 'data' must be a mapping of data.KEY: value, got [1]"),
        ({**_translation(), 7: 1}, "top-level key 7 (int) is not a name"),
        (_translation(task=["translation"]), "task must be one of translation, language_model"),
        (_translation(model={"family": ["transformer"]}),
         "model.family of a translation run must be seq2seq_rnn or transformer, got"),
        (_translation(model={"family": "vit"}), "model.family of a translation run must be"),
        (_translation(model={"d_model": 16}), "model.family is required (seq2seq_rnn or"),
        (_translation(model={"family": "transformer", "d_model": "16"}),
         "model.d_model must be an integer, got '16' (str)"),
        (_translation(model={"family": "transformer", "dropout": float("inf")}),
         "model.dropout must be a finite number, got inf"),
        (_translation(name=["x"]), "name must be a non-empty string, got ['x']"),
        (_translation(out_dir={"a": 1}), "out_dir must be a non-empty string, got {'a': 1}"),
        (_translation(out_dir=" "), "out_dir must be a non-empty string"),
        (_translation(data={"corpus": "reverse", "vocab_size": 10**12}),
         "data.vocab_size must be between 16 and 1,000,000, got 1000000000000"),
        (_translation(data={"corpus": "reverse", "vocab_size": 1e12}),
         "data.vocab_size must be an integer, got 1000000000000.0 (float)"),
        (_translation(data={"corpus": "reverse", "options": {1: 2}}),
         "data.options must be a mapping with string keys"),
        (_translation(train={"lr": float("nan")}), "train.lr must be a finite number, got nan"),
        (_translation(decode={"beam_size": 10**8}),
         "decode.beam_size must be between 1 and 1000, got 100000000"),
        (_translation(train={"max_minutes": float("inf")}),
         "train.max_minutes must be a finite number, got inf"),
        ({"task": "language_model", "model": {"family": "transformer_lm"},
          "decode": {"temperature": float("nan")}},
         "decode.temperature must be a finite number, got nan"),
        ({"task": "language_model", "model": {"family": "transformer_lm"},
          "data": {"tokenizer": "bpe", "vocab_size": 2_000_000}},
         "data.vocab_size must be between 260 and 1,000,000 for byte-level BPE"),
    ],
)  # fmt: skip
def test_malformed_sections_keys_and_values_are_named(raw, message):
    from qkv.tasks.run_config import run_config_from_dict

    with pytest.raises(ValueError) as error:
        run_config_from_dict(raw)
    assert message in str(error.value)


def test_yaml_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes(b"name: ok\nout_dir: caf\xe9\n")
    with pytest.raises(ValueError, match=rf"{path}:2: not valid UTF-8 \(byte 0xe9\)"):
        load_run_config(path)


def test_yaml_exponents_without_a_dot_are_explained(tmp_path):
    """YAML 1.1 reads 1e12 as a string; the error says how to write it."""
    with pytest.raises(ValueError, match=r"got '1e6' \(str\); YAML reads it as text"):
        load_run_config(CONFIG, ["train.max_steps=1e6"])
    assert load_run_config(CONFIG, ["train.lr=1.0e-3"]).train.lr == 1e-3


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"temperature": float("nan")}, "temperature must be a finite number > 0, or 0 for"),
        ({"temperature": float("inf")}, "got inf"),
        ({"temperature": -0.5}, "got -0.5"),
        ({"top_p": float("nan")}, "top_p must be in (0, 1], got nan"),
        ({"repetition_penalty": float("inf")}, "repetition_penalty must be a finite number"),
        ({"max_new_tokens": True}, "max_new_tokens must be an integer in [1, 1,000,000], got True"),
        ({"top_k": 2.5}, "top_k must be an integer >= 1 (or None: all), got 2.5"),
        ({"seed": -1}, "seed must be an integer in [0, 2**64) (or None), got -1"),
        ({"seed": 2**64}, "got 18446744073709551616"),
    ],
)
def test_sampling_settings_must_be_finite_and_in_range(values, message):
    from qkv.decoding.sampling import SamplingConfig

    with pytest.raises(ValueError) as error:
        SamplingConfig(**values)
    assert message in str(error.value)
    assert SamplingConfig(temperature=0, seed=2**64 - 1).temperature == 0


@pytest.mark.parametrize(
    ("task", "family", "typo", "suggestion"),
    [
        ("translation", "transformer", "num_head", "num_heads"),
        ("language_model", "transformer_lm", "d_modle", "d_model"),
        ("classification", "encoder_classifier", "poolling", "pooling"),
        ("tagging", "sequence_tagger", "num_layer", "num_layers"),
        ("image_classification", "vit", "patch_sise", "patch_size"),
        ("captioning", "show_attend_tell", "atention", "attention"),
    ],
)
def test_a_model_key_typo_fails_when_the_yaml_is_read(
    task, family, typo, suggestion, tmp_path, capsys
):
    """Before any data is loaded: the corpus named here does not exist, and the error is the
    typo (with the key it was meant to be), from `qkv train` as from the library."""
    from qkv.cli.main import main

    raw = {
        "task": task,
        "out_dir": str(tmp_path / "run"),
        "data": {"corpus": "file", "options": {"path": str(tmp_path / "missing.tsv")}}
        if task in ("translation", "classification")
        else {},
        "model": {"family": family, typo: 2},
    }
    with pytest.raises(ValueError, match=rf"{typo} \(did you mean {suggestion}\?\)"):
        run_config_from_dict(raw)
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{typo} (did you mean {suggestion}?)" in err and "missing.tsv" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("config", "setting", "refused"),
    [
        ("configs/vit/digits.yaml", "train.batch_tokens=2048", "the batch size is data.batch_size"),
        ("configs/caption/tiny.yaml", "train.batch_tokens=4096", "data.batch_size"),
        ("configs/tiny/lm-kjv-char.yaml", "train.label_smoothing=0.1", "no smoothing"),
        ("configs/classify/rt-transformer.yaml", "train.label_smoothing=0.2", "no smoothing"),
        ("configs/vit/digits.yaml", "train.label_smoothing=0.2", None),
        ("configs/tiny/lm-kjv-char.yaml", "train.label_smoothing=0", None),
        ("configs/tiny/lm-kjv-char.yaml", "train.batch_tokens=512", None),
        ("configs/classify/rt-transformer.yaml", "train.batch_tokens=512", None),
    ],
)
def test_a_train_setting_the_task_does_not_read_is_refused(config, setting, refused):
    """batch_tokens and label_smoothing are read by the task, not the engine: a task that would
    ignore one refuses it (naming the task) instead of training as if it were not there."""
    if refused is None:
        key, value = setting.split("=")
        loaded = load_run_config(config, [setting])
        assert float(getattr(loaded.train, key.split(".")[1])) == float(value)
        return
    with pytest.raises(ValueError, match=rf"{setting.split('=')[0]}: .* do not read it"):
        load_run_config(config, [setting])
    with pytest.raises(ValueError, match=refused):
        load_run_config(config, [setting])


def test_a_section_is_read_as_the_class_its_task_uses():
    from qkv.tasks.language_model.config import LMDataConfig
    from qkv.tasks.translation.config import DataConfig

    config = load_run_config(CONFIG)
    assert config.section("data", DataConfig) is config.data
    with pytest.raises(TypeError, match="data section of this translation run is a DataConfig"):
        config.section("data", LMDataConfig)

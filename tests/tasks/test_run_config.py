"""Run configurations: typos get a suggestion, wrong types name the key and the expected type."""

import pytest

from qkv.tasks.run_config import load_run_config

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

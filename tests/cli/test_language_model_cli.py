"""``qkv train`` / ``generate`` / ``evaluate`` for a language model, through the real command
line: a tiny character model on the King James Bible learns, streams text, and reports its
perplexity; bad input exits 2 without a traceback."""

from __future__ import annotations

import re

import pytest

from tests.commands import qkv, qkv_process
from tests.data.conftest import needs_bible


@needs_bible
def test_train_generate_and_evaluate_a_character_model(tmp_path):
    model = tmp_path / "kjv"
    result = qkv("train", "configs/tiny/lm-kjv-char.yaml", "--quiet", "--set", f"out_dir={model}")
    assert result.returncode == 0, result.stderr
    assert "transformer_lm" in result.stdout

    result = qkv("evaluate", "--model", str(model), "--split", "valid", "--limit", "5000")
    assert result.returncode == 0, result.stderr
    bits = float(re.search(r"bits per character ([\d.]+)", result.stdout).group(1))
    assert bits < 3.3  # a unigram model of English text needs about 4.1 bits per character

    result = qkv_process(
        "generate", "--model", str(model), "And God said", "--max-new-tokens", "40"
    )
    assert result.returncode == 0, result.stderr
    half = qkv(
        "generate", "--model", str(model), "And God said", "--max-new-tokens", "40", "--bf16"
    )
    assert half.returncode == 0 and half.stdout.startswith("And God said"), half.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("And God said") and len(result.stdout) > 40

    sampled = [
        qkv("generate", "--model", str(model), "And", "--temperature", "1", "--seed", "3")
        for _ in range(2)
    ]
    assert sampled[0].stdout == sampled[1].stdout

    for args, message in [
        (["generate", "--model", str(model), "§ ¶"], "outside this model's vocabulary"),
        (["generate", "--model", str(model), "x", "--top-p", "0"], "top_p must be in"),
        (["generate", "--model", str(model), "a" * 300], "reads at most 256"),
        (["generate", "--model", str(tmp_path / "none"), "x"], "no model directory"),
    ]:
        result = qkv(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "override, message",
    [
        ("data.tokenizer=words", "data.tokenizer must be char or bpe"),
        ("model.preset=huge", "unknown model.preset 'huge'"),
        ("data.corpus=plays", "unknown text corpus 'plays'"),
        ("data.block_sise=8", "did you mean data.block_size"),
    ],
)
def test_bad_language_model_configs_exit_2(tmp_path, override, message):
    result = qkv(
        "train",
        "configs/tiny/lm-kjv-char.yaml",
        "--set",
        override,
        "--set",
        f"out_dir={tmp_path / 'x'}",
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr

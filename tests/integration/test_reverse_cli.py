"""Learning tests through the real command line (Sockeye-style): every translation model kind
must learn to reverse held-out symbol sequences (at least 95% exact match), and the trained
directory must serve ``translate``, ``evaluate`` and ``plot-attention``. Each kind trains for
250-400 (the RNNs) or 800 (the Transformer) steps, under a CPU minute each, so these run in
``make test``."""

import re

import pytest

from tests.commands import ROOT, qkv_process
from tests.commands import qkv as qkv_here

KINDS = ["transformer", "rnn-none", "rnn-bahdanau", "rnn-luong"]


@pytest.mark.parametrize("kind", KINDS)
def test_learns_to_reverse_and_serves_every_command(kind, tmp_path):
    # One test per model kind, so that parallel workers never train the same model twice. The
    # Transformer runs every command as a real process; the others in this process (same code).
    qkv = qkv_process if kind == "transformer" else qkv_here
    model_dir = tmp_path / kind
    config = f"configs/tiny/reverse-{kind}.yaml"
    result = qkv("train", config, "--quiet", "--set", f"out_dir={model_dir}")
    assert result.returncode == 0, result.stderr
    budget = re.search(r"in \S+: ([\d,]+) steps", result.stdout)  # announced before training
    assert budget is not None and budget.group(1) == "{:,}".format(
        int(re.search(r"max_steps: (\d+)", (ROOT / config).read_text()).group(1))
    ), result.stdout

    result = qkv("evaluate", "--model", str(model_dir), "--examples", "0", "--quiet")
    assert result.returncode == 0, result.stderr
    exact = float(re.search(r"exact match ([\d.]+)%", result.stdout).group(1))
    assert exact >= 95.0, result.stdout
    assert "BLEU" in result.stdout and "chrF" in result.stdout

    result = qkv("translate", "--model", str(model_dir), "a b c d", "e f g")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["d c b a", "g f e"]
    piped = qkv("translate", "--model", str(model_dir), stdin="j i h\nb a c e\n")
    assert piped.stdout.splitlines() == ["h i j", "e c a b"]

    image = tmp_path / "align.png"
    result = qkv("plot-attention", "--model", str(model_dir), "a b c d", "-o", str(image))
    if kind == "rnn-none":  # the fixed-context baseline has no attention to draw
        assert result.returncode == 2
        assert "no attention" in result.stderr and "Traceback" not in result.stderr
        assert not image.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert image.stat().st_size > 1000


def test_bad_input_exits_2_without_traceback(tmp_path):
    qkv = qkv_process
    missing = qkv("translate", "--model", str(tmp_path / "nope"), "a b")
    assert missing.returncode == 2 and "no model directory" in missing.stderr
    bad_key = qkv("train", "configs/tiny/reverse-transformer.yaml", "--set", "train.nope=1")
    assert bad_key.returncode == 2 and "train.nope" in bad_key.stderr
    for result in (missing, bad_key):
        assert "Traceback" not in result.stderr

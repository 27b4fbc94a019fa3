"""Learning tests through the real command line (Sockeye-style): every translation model kind
must learn to reverse held-out symbol sequences, and the trained directory must serve
``translate``, ``evaluate`` and ``plot-attention``."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Four training runs of one to several minutes each: run with `make test-slow`, not in `make test`.
pytestmark = pytest.mark.slow
KINDS = ["transformer", "rnn-none", "rnn-bahdanau", "rnn-luong"]


def qkv(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if env.get("PYTEST_XDIST_WORKER"):  # one thread per parallel test worker (see conftest.py)
        env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "qkv", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=ROOT,
        env=env,
        timeout=900,
    )


@pytest.fixture(scope="module", params=KINDS)
def trained(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    config = f"configs/tiny/reverse-{request.param}.yaml"
    result = qkv("train", config, "--quiet", "--set", f"out_dir={out}")
    assert result.returncode == 0, result.stderr
    return request.param, out


def test_reaches_95_percent_exact_match_on_held_out_sequences(trained):
    _, model_dir = trained
    result = qkv("evaluate", "--model", str(model_dir), "--examples", "0")
    assert result.returncode == 0, result.stderr
    exact = float(re.search(r"exact match ([\d.]+)%", result.stdout).group(1))
    assert exact >= 95.0, result.stdout
    assert "BLEU" in result.stdout and "chrF" in result.stdout


def test_translate_arguments_and_stdin(trained):
    _, model_dir = trained
    result = qkv("translate", "--model", str(model_dir), "a b c d", "e f g")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["d c b a", "g f e"]
    piped = qkv("translate", "--model", str(model_dir), stdin="j i h\nb a c e\n")
    assert piped.stdout.splitlines() == ["h i j", "e c a b"]


def test_plot_attention(trained, tmp_path):
    kind, model_dir = trained
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
    missing = qkv("translate", "--model", str(tmp_path / "nope"), "a b")
    assert missing.returncode == 2 and "no model directory" in missing.stderr
    bad_key = qkv("train", "configs/tiny/reverse-transformer.yaml", "--set", "train.nope=1")
    assert bad_key.returncode == 2 and "train.nope" in bad_key.stderr
    for result in (missing, bad_key):
        assert "Traceback" not in result.stderr

"""Resume is exact, through the real command line: a run killed with SIGKILL (between saves, or in
the middle of one), or stopped by SIGINT/SIGTERM (with periodic checkpoints or none), then
resumed, ends with the same weights, bit for bit, and the same metrics.csv (but for the columns
that measure time) as the same run left alone. Training rows come every 4 steps and checkpoints
every 5, so resumes start inside a logging window."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.commands import qkv as qkv_here
from tests.training.test_stop_and_resume import leave_torn_temporaries

ROOT = Path(__file__).resolve().parents[2]
STEPS, EVERY = 40, 5
SETTINGS = [
    "data.options.n_train=400",
    "data.options.n_valid=20",
    "data.options.n_test=20",
    "data.valid_bleu_sentences=10",
    "model.dropout=0.1",  # random numbers in every step: the generators must be restored
    f"train.max_steps={STEPS}",
    "train.patience=null",
    "train.eval_every=20",
    f"train.checkpoint_every={EVERY}",
    "train.log_every=4",
]
TIMING = ("tokens_per_s", "minutes")


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def command(out: Path, *extra: str) -> list[str]:
    sets = [x for s in [*SETTINGS, f"out_dir={out}"] for x in ("--set", s)]
    return ["train", "configs/tiny/reverse-transformer.yaml", "--quiet", *sets, *extra]


def qkv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qkv", *args],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def latest_step(out: Path) -> int:
    try:
        return json.loads((out / "checkpoints" / "latest.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return -1


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    pointer = json.loads((out / "checkpoints" / "latest.json").read_text())
    assert pointer["step"] == STEPS
    return load_file(out / "checkpoints" / pointer["checkpoint"] / "model.safetensors")


def metrics(out: Path) -> list[dict[str, str]]:
    """metrics.csv without the columns that measure time (they differ between any two runs)."""
    with open(out / "metrics.csv", newline="", encoding="utf-8") as handle:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict[str, torch.Tensor], list[dict[str, str]]]:
    out = tmp_path_factory.mktemp("straight")
    result = qkv(*command(out))
    assert result.returncode == 0, result.stderr
    rows = metrics(out)
    assert [int(r["step"]) for r in rows if r["train_loss"]] == list(range(4, STEPS + 1, 4))
    return final_weights(out), rows


def assert_same(reference: dict, weights: dict) -> None:
    assert reference.keys() == weights.keys()
    for name in reference:
        assert torch.equal(reference[name], weights[name]), name


def resume_and_check(out: Path, reference: tuple) -> None:
    # The stop is what needs a process of its own; the resume runs in this one, on one thread
    # as the reference did (a second thread could change the sums' rounding).
    result = qkv_here("train", "--resume", str(out), "--quiet", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stdout
    weights, rows = reference
    assert_same(weights, final_weights(out))
    assert metrics(out) == rows  # the window cut by the stop is logged as if uncut


def test_sigkill_between_saves_then_resume(reference, tmp_path):
    out = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "qkv", *command(out)], cwd=ROOT, env=env())
    deadline = time.monotonic() + 300
    while latest_step(out) < STEPS // 2 and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert STEPS // 2 <= latest_step(out) < STEPS
    resume_and_check(out, reference)


def test_sigkill_in_the_middle_of_a_save_leaves_the_previous_checkpoint(reference, tmp_path):
    out, k = tmp_path / "torn", 25
    args = command(out)
    result = subprocess.run(
        [sys.executable, "tests/cli/crash_in_save.py", str(k), *args],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == -signal.SIGKILL
    assert latest_step(out) == k - EVERY  # the half-written checkpoint never became the latest
    assert list((out / "checkpoints").glob(f".step-{k:09d}.*.tmp"))  # it is still there, torn
    # Other writes killed half-way, and a pointer deleted by hand: the resume removes the
    # temporaries and continues from the newest complete checkpoint, never the torn one.
    (out / "checkpoints" / "latest.json").unlink()
    leave_torn_temporaries(out)
    resume_and_check(out, reference)
    assert not list(out.rglob("*.tmp"))


def logged_step(out: Path) -> int:
    """The step of the last training row in metrics.csv (-1 before the first)."""
    try:
        return max(int(r["step"]) for r in metrics(out) if r["train_loss"])
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.parametrize("every", [EVERY, None])  # None: the setting of every tiny preset
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_cleanly_with_a_resume_hint(reference, tmp_path, sig, every):
    out = tmp_path / "stopped"
    every_setting = "null" if every is None else str(every)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qkv",
            *command(out, "--set", f"train.checkpoint_every={every_setting}"),
        ],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    started = (lambda: latest_step(out) >= EVERY) if every else (lambda: logged_step(out) >= 4)
    while not started() and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + sig, stderr
    assert "saved a checkpoint" in stdout and "Traceback" not in stderr
    assert f"qkv train --resume {out}" in stdout
    stopped_at = latest_step(out)
    assert 4 <= stopped_at < STEPS and f"stopped after step {stopped_at} " in stdout
    if every is None:
        assert [p.name for p in (out / "checkpoints").glob("step-*")] == [f"step-{stopped_at:09d}"]
    resume_and_check(out, reference)


def test_a_directory_holding_a_run_is_refused_without_overwrite(tmp_path):
    qkv = qkv_here  # error paths: the process boundary is not what is tested
    out = tmp_path / "run"
    first = qkv(*command(out), "--set", "train.max_steps=2")
    assert first.returncode == 0, first.stderr
    again = qkv(*command(out), "--set", "train.max_steps=2")
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert f"qkv train --resume {out}" in again.stderr and "Traceback" not in again.stderr
    forced = qkv(*command(out), "--set", "train.max_steps=2", "--overwrite")
    assert forced.returncode == 0, forced.stderr


def test_resume_errors_name_the_problem(tmp_path):
    qkv = qkv_here
    nothing = qkv("train", "--resume", str(tmp_path / "none"))
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr
    both = qkv("train", "configs/tiny/reverse-transformer.yaml", "--resume", str(tmp_path))
    assert both.returncode == 2 and "CONFIG" in both.stderr
    model_change = qkv("train", "--resume", str(tmp_path), "--set", "model.d_model=8")
    assert model_change.returncode == 2 and "only train.*" in model_change.stderr
    for result in (nothing, both, model_change):
        assert "Traceback" not in result.stderr

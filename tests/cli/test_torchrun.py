"""torchrun: two processes on CPU (gloo) reach the weights of one process taking the same global
batch (two batches accumulated per step), within 1e-6; only rank 0 writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
STEPS = 12
SETTINGS = [
    "data.options.n_train=400",
    "data.options.n_valid=20",
    "data.options.n_test=20",
    "data.valid_bleu_sentences=10",
    "model.dropout=0.0",  # each rank draws its own dropout masks; without dropout, none
    f"train.max_steps={STEPS}",
    "train.patience=null",
    "train.eval_every=6",
    "train.checkpoint_every=6",
    "train.keep_checkpoints=2",
]


def run(
    prefix: list[str],
    out: Path,
    accumulate: int,
    config: str = "configs/tiny/reverse-transformer.yaml",
    settings: list[str] = SETTINGS,
) -> subprocess.CompletedProcess:
    sets = [
        x
        for s in [*settings, f"out_dir={out}", f"train.accumulate={accumulate}"]
        for x in ("--set", s)
    ]
    return subprocess.run(
        [*prefix, "train", config, "--quiet", *sets],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    pointer = json.loads((out / "checkpoints" / "latest.json").read_text())
    assert pointer["step"] == STEPS
    return load_file(out / "checkpoints" / pointer["checkpoint"] / "model.safetensors")


TORCHRUN = [
    sys.executable,
    "-m",
    "torch.distributed.run",
    "--standalone",
    "--nproc_per_node",
    "2",
    "-m",
    "qkv",
]


def test_two_gloo_processes_equal_one_process_with_the_same_global_batch(tmp_path):
    single = run([sys.executable, "-m", "qkv"], tmp_path / "one", accumulate=2)
    assert single.returncode == 0, single.stderr
    double = run(TORCHRUN, tmp_path / "two", accumulate=1)
    assert double.returncode == 0, double.stderr
    assert "on 2 processes" in double.stdout
    assert double.stdout.count("model saved in") == 1  # rank 0 alone reports and writes
    one, two = final_weights(tmp_path / "one"), final_weights(tmp_path / "two")
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], atol=1e-6, rtol=0, msg=name)
    changed = load_file(tmp_path / "one" / "checkpoints" / "step-000000006" / "model.safetensors")
    assert any(not torch.equal(changed[k], one[k]) for k in one)  # the steps did move the weights


def test_a_language_model_trains_alike_on_two_processes(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i}: the quick brown fox jumps\n" for i in range(2000)))
    settings = [
        "data.corpus=text",
        f"data.options={{path: {text}}}",
        "data.block_size=32",
        "data.valid_tokens=2000",
        "model.num_layers=1",
        "train.batch_tokens=256",
        "train.warmup_steps=3",
        f"train.max_steps={STEPS}",
        "train.eval_every=6",
        "train.checkpoint_every=6",
        "train.keep_checkpoints=2",
    ]
    config = "configs/tiny/lm-kjv-char.yaml"
    single = run([sys.executable, "-m", "qkv"], tmp_path / "one", 2, config, settings)
    assert single.returncode == 0, single.stderr
    double = run(TORCHRUN, tmp_path / "two", 1, config, settings)
    assert double.returncode == 0, double.stderr
    assert "on 2 processes" in double.stdout
    one, two = final_weights(tmp_path / "one"), final_weights(tmp_path / "two")
    for name in one:
        torch.testing.assert_close(two[name], one[name], atol=1e-6, rtol=0, msg=name)

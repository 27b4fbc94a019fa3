"""The CUDA paths of the engine (skipped without a GPU; CI has none, so these run on a GPU
machine by hand: ``pytest tests/training/test_cuda.py``). float16 needs the grad scaler, and its
state must survive a resume; bfloat16 and float16 must still learn a real task."""

import json
import re
import warnings

import pytest
import torch

from qkv.training.state import latest_checkpoint
from qkv.training.trainer import resolve_device
from tests.commands import qkv_process
from tests.training.test_trainer import dropout_problem, run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_auto_picks_the_gpu():
    assert resolve_device("auto") == torch.device("cuda")


def test_fp16_resume_is_bit_exact_with_the_scaler_state(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    settings = dict(device="cuda", precision="fp16")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reference, _ = run(tmp_path / "straight", 10, **problem, **settings)
    # The scaler skips overflowing steps; the schedule still follows the step count, unwarned.
    assert not [w for w in caught if "lr_scheduler.step" in str(w.message)]
    run(tmp_path / "stopped", 5, **problem, **settings)
    checkpoint = latest_checkpoint(tmp_path / "stopped")
    assert checkpoint is not None and checkpoint.name == "step-000000005"
    state = json.loads((checkpoint / "state.json").read_text())
    assert state["grad_scaler"]["scale"] > 0  # the loss scale is part of the checkpoint
    resumed, result = run(tmp_path / "stopped", 10, resume=True, **problem, **settings)
    assert result.steps == 10
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert a.device.type == "cuda" and a.dtype == torch.float32  # master weights in fp32
        assert torch.equal(a, b)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau"])
def test_low_precision_on_the_gpu_learns_to_reverse(kind, precision, tmp_path):
    model_dir = tmp_path / kind
    config = f"configs/tiny/reverse-{kind}.yaml"
    overrides = [f"out_dir={model_dir}", "train.device=cuda", f"train.precision={precision}"]
    result = qkv_process("train", config, "--quiet", *[a for o in overrides for a in ("--set", o)])
    assert result.returncode == 0, result.stderr
    result = qkv_process("evaluate", "--model", str(model_dir), "--examples", "0", "--quiet")
    assert result.returncode == 0, result.stderr
    exact = float(re.search(r"exact match ([\d.]+)%", result.stdout).group(1))
    assert exact >= 95.0, result.stdout

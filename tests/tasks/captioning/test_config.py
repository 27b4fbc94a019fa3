"""The weights of the captioning loss are the ``train:`` section's (``CaptionTrainConfig``), not
the model's: a YAML file that sets one under ``model:`` is refused, naming its new place; a run
saved when they were model keys (its ``config.json``) loads with them moved, evaluates as before
and resumes to the very weights of a run that never stopped; a bad weight is named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from qkv.tasks.captioning.config import OBJECTIVE_WEIGHTS, CaptionTrainConfig
from qkv.tasks.captioning.runner import Captioner
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_dir import load_model_run_config, resume_config
from qkv.tasks.run_skeleton import run_training
from qkv.training.state import latest_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = Path(__file__).resolve().parents[3] / "configs" / "caption" / "tiny.yaml"
WEIGHTS = {"doubly_stochastic": 0.5, "reinforce_weight": 0.3, "entropy_weight": 0.02}


@pytest.mark.parametrize("name", OBJECTIVE_WEIGHTS)
def test_a_weight_under_model_is_refused_naming_the_train_section(name):
    with pytest.raises(ValueError, match=rf"model\.{name} is now train\.{name} \(a weight of"):
        load_run_config(TINY, [f"model.{name}=0.5"])
    config = load_run_config(TINY, [f"train.{name}=0.5"])
    assert isinstance(config.train, CaptionTrainConfig)
    assert getattr(config.train, name) == 0.5 and name not in config.model


@pytest.mark.parametrize("name", OBJECTIVE_WEIGHTS)
def test_a_bad_weight_is_named(name):
    with pytest.raises(ValueError, match=rf"train\.{name} must be >= 0, got -1\.0"):
        load_run_config(TINY, [f"train.{name}=-1.0"])
    with pytest.raises(ValueError, match=rf"train\.{name} must be a number"):
        load_run_config(TINY, [f"train.{name}=much"])
    assert getattr(CaptionTrainConfig(), name) == {"doubly_stochastic": 1.0,
                                                   "reinforce_weight": 1.0,
                                                   "entropy_weight": 0.01}[name]  # fmt: skip


def _as_saved_before_the_move(run: Path) -> None:
    """Rewrite ``run/config.json`` as runs wrote it when the weights were model keys (and
    before they kept a manifest)."""
    (run / "manifest.json").unlink()
    path = run / "config.json"
    saved = json.loads(path.read_text())
    for name in OBJECTIVE_WEIGHTS:
        saved["model"][name] = saved["train"].pop(name)
    path.write_text(json.dumps(saved))


def test_a_run_saved_with_the_weights_under_model_loads_evaluates_and_resumes_as_before(
    tmp_path,
):
    pytest.importorskip("sklearn")
    settings = [
        "model.attention=hard",
        *[f"train.{name}={value}" for name, value in WEIGHTS.items()],
        "train.checkpoint_every=3",
        "train.eval_every=3",
        "data.train_strips=64",
        "data.valid_strips=20",
        "data.test_strips=30",
    ]
    whole, split = tmp_path / "whole", tmp_path / "split"
    run_training(load_run_config(TINY, [f"out_dir={whole}", *settings, "train.max_steps=6"]))
    run_training(load_run_config(TINY, [f"out_dir={split}", *settings, "train.max_steps=3"]))
    before = Captioner.load(whole).evaluate("test")

    old = tmp_path / "old"
    shutil.copytree(whole, old)
    _as_saved_before_the_move(old)
    assert "reinforce_weight" in json.loads((old / "config.json").read_text())["model"]
    config = load_model_run_config(old)
    assert {name: getattr(config.train, name) for name in WEIGHTS} == WEIGHTS
    assert not set(OBJECTIVE_WEIGHTS) & set(config.model)
    assert Captioner.load(old).evaluate("test") == before

    # The stopped run, saved the old way, resumes with its own weights (not the defaults).
    _as_saved_before_the_move(split)
    resumed = run_training(resume_config(split, ["train.max_steps=6"]), resume=True)
    assert resumed.result.steps == 6
    a = load_file(latest_checkpoint(whole) / "model.safetensors")
    b = load_file(latest_checkpoint(split) / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rewritten = json.loads((split / "config.json").read_text())  # in the new place now
    assert {name: rewritten["train"][name] for name in WEIGHTS} == WEIGHTS

"""Nothing is lost and nothing is claimed that did not happen, through ``qkv.cli.main`` in this
process (so that writes can fail on cue): a setting rejected late leaves the directory usable, a
full disk while saving the best weights and a corrupt checkpoint end with exit 2 and a message
naming the file or key, and ``qkv evaluate`` prints its scores even when it cannot record them."""

import errno
import json
from pathlib import Path

import pytest

from qkv.cli.main import main
from qkv.manifest import write_manifest
from qkv.training.state import FILES, complete_checkpoints, latest_checkpoint

SETTINGS = [
    "data.options.n_train=200",
    "data.options.n_valid=10",
    "data.options.n_test=10",
    "data.valid_bleu_sentences=5",
    "train.max_steps=4",
    "train.eval_every=2",
    "train.checkpoint_every=1",
    "train.log_every=1",
]


def train_args(out: Path, *extra: str) -> list[str]:
    sets = [x for s in [*SETTINGS, f"out_dir={out}", *extra] for x in ("--set", s)]
    return ["train", "configs/tiny/reverse-transformer.yaml", "--quiet", *sets]


@pytest.fixture(autouse=True)
def repository_root(monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def test_a_setting_rejected_late_writes_nothing_and_the_corrected_run_starts(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_args(out, "train.precision=fp16", "train.device=cpu")) == 2
    assert "train.precision=fp16 needs a CUDA device" in capsys.readouterr().err
    assert not out.exists()
    assert main(train_args(out, "train.max_steps=1")) == 0


def test_the_leftovers_of_a_failed_start_are_not_a_run(tmp_path, capsys, caplog):
    out = tmp_path / "run"
    # Known only once the data are batched, after the vocabularies are written: too few
    # batches for one step.
    assert main(train_args(out, "train.accumulate=100000")) == 2
    assert "produced no step" in capsys.readouterr().err
    assert (out / "config.json").is_file() and not complete_checkpoints(out)
    assert main(["train", "--resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nothing to resume" in err and f"--set out_dir={out}`" in err
    assert main(train_args(out, "train.max_steps=1")) == 0  # no --overwrite needed
    assert "holds no checkpoint and no trained model" in caplog.text
    assert main(train_args(out, "train.max_steps=1")) == 2  # now it holds a run
    assert "already holds a run" in capsys.readouterr().err


def test_a_full_disk_while_saving_the_best_weights_is_a_clean_exit_2(tmp_path, capsys, monkeypatch):
    import safetensors.torch

    out = tmp_path / "run"
    save_file = safetensors.torch.save_file

    def full_disk_for_best_weights(tensors, filename, *args, **kwargs):
        if Path(filename).parent == out:  # the best weights; checkpoints go to their own folder
            Path(filename).write_bytes(b"the first bytes")
            raise OSError(errno.ENOSPC, "No space left on device")
        return save_file(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk_for_best_weights)
    assert main(train_args(out)) == 2
    err = capsys.readouterr().err
    assert f"cannot write {out / 'model.safetensors'}: No space left on device" in err
    assert not (out / "model.safetensors").exists() and not list(out.rglob("*.tmp"))
    assert latest_checkpoint(out).name == "step-000000001"  # the one before the failed save
    monkeypatch.setattr(safetensors.torch, "save_file", save_file)  # space freed
    assert main(["train", "--resume", str(out), "--quiet"]) == 0
    assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("value", [1.5, "2", None])
def test_a_corrupt_step_in_state_json_is_exit_2_naming_loop_step(tmp_path, capsys, value):
    out = tmp_path / "run"
    assert main(train_args(out, "train.max_steps=2")) == 0
    state_file = latest_checkpoint(out) / "state.json"
    state = json.loads(state_file.read_text())
    state["loop"]["step"] = value
    state_file.write_text(json.dumps(state))
    write_manifest(state_file.parent, FILES)  # as if qkv had written it so: the loop check's turn
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--set", "train.max_steps=4"]) == 2
    err = capsys.readouterr().err
    assert f"{state_file}: loop.step must be an integer >= 0, got {value!r}" in err


@pytest.fixture(scope="module")
def translation_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(Path(__file__).resolve().parents[2])
        assert main(train_args(out, "train.max_steps=2")) == 0
    return out


def test_evaluate_prints_the_scores_before_recording_them(translation_model, capsys):
    assert main(["evaluate", "--model", str(translation_model), "--quiet"]) == 0
    printed = capsys.readouterr().out
    results = json.loads((translation_model / "results.json").read_text())
    assert f"BLEU {results['test']['bleu']:.2f}" in printed


def test_evaluate_on_a_read_only_model_prints_the_scores_then_says_they_were_not_recorded(
    translation_model, capsys, monkeypatch
):
    import tempfile

    before = {p.name: p.stat().st_mtime_ns for p in translation_model.iterdir()}

    def read_only(*args, **kwargs):  # what creating a file in a read-only directory raises
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert main(["evaluate", "--model", str(translation_model), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "BLEU " in captured.out and "chrF " in captured.out
    assert "the scores above were not recorded in results.json" in captured.err
    assert f"cannot write {translation_model / 'results.json'}: Read-only" in captured.err
    assert "--no-save" in captured.err
    assert main(["evaluate", "--model", str(translation_model), "--quiet", "--no-save"]) == 0
    assert "BLEU " in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in translation_model.iterdir()} == before

"""What a stopped run leaves, and what a resume makes of it: a signal saves a checkpoint even
without periodic ones, the metrics log after a resume equals the uninterrupted one (the partial
logging window is part of the checkpoint), a deleted ``latest.json`` falls back to the newest
complete checkpoint, temporaries of killed writes are removed, and corrupt checkpoints or weights
are refused with the key or tensor named."""

import csv
import errno
import json
import signal

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from qkv.manifest import write_manifest
from qkv.training.checkpoint import CheckpointError, load_weights, save_weights
from qkv.training.state import FILES, complete_checkpoints, latest_checkpoint
from qkv.training.trainer import TrainConfig, TrainingLoop, train
from tests.training.test_trainer import dropout_problem, run

STEPS = 10


def fit(
    run_dir, max_steps, *, resume=False, stop_at=None, crash_at=None, checkpoint_every=None, keep=1
):
    """The dropout problem (4 batches an epoch) logged every 4 steps, so that a stop at 5 or 6
    falls inside a logging window; ``stop_at``: a SIGINT arrives during that step; ``crash_at``:
    that step raises."""
    make_model, data, loss_fn = dropout_problem()
    calls = [0]

    def loss(model, batch):
        calls[0] += 1
        if calls[0] == stop_at:
            signal.raise_signal(signal.SIGINT)
        if calls[0] == crash_at:
            raise RuntimeError(f"simulated crash in step {crash_at}")
        return loss_fn(model, batch)

    model = make_model()
    config = TrainConfig(
        max_steps=max_steps,
        lr=0.01,
        warmup_steps=3,
        log_every=4,
        eval_every=5,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=keep,
    )
    result = train(
        model,
        loss_fn=loss,
        batches=lambda epoch, start: data[start:],
        config=config,
        evaluate=lambda: {"valid_loss": float(sum(p.sum() for p in model.parameters()))},
        run_dir=run_dir,
        resume=resume,
        handle_signals=stop_at is not None,
    )
    return model, result


def logged(run_dir) -> list[dict[str, str]]:
    """The rows of metrics.csv without the columns that measure time."""
    with open(run_dir / "metrics.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "minutes")} for r in rows]


def assert_same_weights(a: nn.Module, b: nn.Module) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("stop_at", [5, 6, 8])  # inside a logging window; at its end
def test_a_signal_checkpoints_without_checkpoint_every_and_the_log_resumes_exactly(
    tmp_path, stop_at
):
    reference, _ = fit(tmp_path / "straight", STEPS)
    assert not (tmp_path / "straight" / "checkpoints").exists()  # checkpoint_every=None
    _, result = fit(tmp_path / "stopped", STEPS, stop_at=stop_at)
    assert result.stopped == "interrupted" and result.steps == stop_at
    assert result.checkpoint is not None and result.checkpoint.name == f"step-{stop_at:09d}"
    assert latest_checkpoint(tmp_path / "stopped") == result.checkpoint
    resumed, result = fit(tmp_path / "stopped", STEPS, resume=True)
    assert result.steps == STEPS and result.checkpoint is not None  # a resumed run saves its end
    assert_same_weights(reference, resumed)
    assert logged(tmp_path / "stopped") == logged(tmp_path / "straight")
    assert [r["step"] for r in logged(tmp_path / "straight") if r["train_loss"]] == ["4", "8"]


def test_the_loop_object_stepped_by_hand_checkpoints_a_run_that_resumes_exactly(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    reference, _ = run(tmp_path / "straight", 10, **problem)
    model = make_model()
    config = TrainConfig(max_steps=10, lr=0.01, warmup_steps=3, checkpoint_every=3, log_every=1)
    loop = TrainingLoop(
        model,
        loss_fn=loss_fn,
        batches=lambda epoch, start: data[start:],
        config=config,
        run_dir=tmp_path / "by-hand",
    )
    model.train()
    for batch in data[:2]:
        loop.step([batch])
        assert loop.after_step() is None
    assert (loop.state.step, loop.state.batches_in_epoch) == (2, 2)
    saved = loop.checkpoint(always=True)
    loop.log.close()
    assert saved is not None and saved.name == "step-000000002"
    resumed, result = run(tmp_path / "by-hand", 10, resume=True, **problem)
    assert result.steps == 10
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_a_periodic_checkpoint_inside_a_logging_window_resumes_the_log_exactly(tmp_path):
    fit(tmp_path / "straight", STEPS, checkpoint_every=3)
    with pytest.raises(RuntimeError, match="simulated crash"):
        fit(tmp_path / "crashed", STEPS, checkpoint_every=3, crash_at=7)  # the last: 6, mid-window
    assert latest_checkpoint(tmp_path / "crashed").name == "step-000000006"
    fit(tmp_path / "crashed", STEPS, checkpoint_every=3, resume=True)
    assert logged(tmp_path / "crashed") == logged(tmp_path / "straight")


def test_a_run_without_checkpoints_saves_none_when_it_ends_normally(tmp_path):
    _, result = fit(tmp_path, 4)
    assert result.checkpoint is None and not (tmp_path / "checkpoints").exists()


def test_a_deleted_latest_json_resumes_from_the_newest_complete_checkpoint(tmp_path, caplog):
    reference, _ = fit(tmp_path / "straight", STEPS)
    run_dir = tmp_path / "stopped"
    fit(run_dir, 7, checkpoint_every=3, keep=3)  # checkpoints at 3, 6 and 7
    root = run_dir / "checkpoints"
    (root / "latest.json").unlink()
    (root / ".step-000000009.k2j4x9a1.tmp").mkdir()  # a torn save: never a candidate
    (root / "step-000000008").mkdir()  # incomplete (emptied by hand): skipped
    assert [p.name for p in complete_checkpoints(run_dir)][-1] == "step-000000007"
    assert latest_checkpoint(run_dir) == root / "step-000000007"
    assert "latest.json is missing" in caplog.text and "step-000000007" in caplog.text
    resumed, result = fit(run_dir, STEPS, resume=True)
    assert result.steps == STEPS
    assert_same_weights(reference, resumed)


def test_a_pointer_to_nothing_without_any_checkpoint_is_an_error_naming_it(tmp_path):
    root = tmp_path / "checkpoints"
    root.mkdir()
    (root / "latest.json").write_text('{"checkpoint": "step-000000004", "step": 4}')
    with pytest.raises(CheckpointError, match=r"latest\.json names no checkpoint"):
        latest_checkpoint(tmp_path)


def leave_torn_temporaries(run_dir) -> list:
    """The temporary files that writes killed half-way leave in a run directory."""
    stale = [
        run_dir / ".model.safetensors.k2j4_x9a.tmp",
        run_dir / ".metrics.csv.abcdefgh.tmp",
        run_dir / "checkpoints" / ".latest.json.0a1b2c3d.tmp",
    ]
    for path in stale:
        path.write_bytes(b"torn")
    return stale


def test_a_resume_removes_the_temporaries_of_killed_writes(tmp_path):
    fit(tmp_path, 6, stop_at=5)
    stale = leave_torn_temporaries(tmp_path)
    torn_checkpoint = tmp_path / "checkpoints" / ".step-000000006.zz99zz99.tmp"
    torn_checkpoint.mkdir()
    (torn_checkpoint / "model.safetensors").write_bytes(b"torn")
    kept = [tmp_path / "notes.tmp", tmp_path / ".hidden.tmp"]  # not names qkv writes
    for path in kept:
        path.write_text("mine")
    fit(tmp_path, STEPS, resume=True)
    assert not any(path.exists() for path in [*stale, torn_checkpoint])
    assert all(path.read_text() == "mine" for path in kept)


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("step", 4.5, "4.5"),
        ("step", "4", "'4'"),
        ("step", -1, "-1"),
        ("epoch", None, "None"),
        ("clock_seconds", "soon", "'soon'"),
        ("best", [1, 2], r"\[1, 2\]"),
    ],
)
def test_a_corrupt_loop_state_is_refused_naming_the_key_and_the_value(
    tmp_path, key, value, expected
):
    fit(tmp_path, 4, stop_at=3)
    state_file = latest_checkpoint(tmp_path) / "state.json"
    state = json.loads(state_file.read_text())
    state["loop"][key] = value
    state_file.write_text(json.dumps(state))
    write_manifest(state_file.parent, FILES)  # as if qkv had written it so: the loop check's turn
    with pytest.raises(CheckpointError, match=rf"state\.json: loop\.{key} must be .*{expected}"):
        fit(tmp_path, STEPS, resume=True)


def small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda w: w.to(torch.int64), r"'0\.weight' is torch\.int64, but the model holds "),
        (lambda w: w.to(torch.bool), r"'0\.weight' is torch\.bool"),
        (lambda w: w.index_fill(1, torch.tensor([2]), float("nan")), r"'0\.weight' holds 4 NaN"),
        (lambda w: w.index_fill(0, torch.tensor([1]), float("inf")), r"'0\.weight' holds 3 NaN"),
    ],
)
def test_weights_of_the_wrong_dtype_or_not_finite_are_refused_naming_the_tensor(
    tmp_path, change, message
):
    source = small_model()
    tensors = {k: v.clone() for k, v in source.state_dict().items()}
    tensors["0.weight"] = change(tensors["0.weight"])
    save_file(tensors, tmp_path / "model.safetensors")
    target = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError, match=message):
        load_weights(target, tmp_path / "model.safetensors")
    for name, value in target.state_dict().items():  # nothing was loaded
        assert torch.equal(value, before[name]), name


def test_lower_precision_float_weights_still_load(tmp_path):
    source = small_model().to(torch.bfloat16)
    save_weights(source, tmp_path / "model.safetensors")
    target = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    load_weights(target, tmp_path / "model.safetensors")
    assert torch.equal(target[0].weight, source[0].weight.float())


def test_a_full_disk_while_saving_weights_names_the_file_and_keeps_the_old_one(
    tmp_path, monkeypatch
):
    path = tmp_path / "model.safetensors"
    first = small_model()
    save_weights(first, path)
    saved = path.read_bytes()

    def full_disk(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("safetensors.torch.save_file", full_disk)
    with pytest.raises(OSError, match=r"cannot write .*model\.safetensors: No space left") as info:
        save_weights(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)), path)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


@pytest.mark.parametrize(
    ("message", "errno_", "reason"),
    [
        ("I/O error: No space left on device (os error 28)", errno.ENOSPC, "No space left"),
        ("I/O error: File too large (os error 27)", errno.EFBIG, "File too large"),
        (
            "something else",
            None,
            r"safetensors could not write the weights \(Error while serializing: something",
        ),
    ],
)
def test_safetensors_own_write_error_is_an_os_error_naming_the_file(
    tmp_path, monkeypatch, message, errno_, reason
):
    """safetensors reports a failed write as its own ``SafetensorError`` (not an ``OSError``,
    so it escaped ``atomic_file`` unnamed); the message is the one safetensors 0.8 gives when
    a write fails (seen under ``RLIMIT_FSIZE``: ``... File too large (os error 27)``)."""
    from safetensors import SafetensorError

    path = tmp_path / "model.safetensors"
    save_weights(small_model(), path)
    saved = path.read_bytes()

    def failing_write(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"half a file")
        raise SafetensorError(f"Error while serializing: {message}")

    monkeypatch.setattr("safetensors.torch.serialize_file", failing_write)
    with pytest.raises(OSError, match=rf"cannot write .*model\.safetensors: {reason}") as info:
        save_weights(small_model(), path)
    assert info.value.errno == errno_
    assert path.read_bytes() == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]

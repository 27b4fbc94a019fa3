"""The metrics log: the CSV and its TensorBoard mirror hold the same numbers, a resume drops the
rows after the checkpoint from both, and the tensorboard setting is honoured."""

import csv
from types import SimpleNamespace

import pytest
from torch import nn

from qkv.training import metrics_log
from qkv.training.metrics_log import MetricsLog
from qkv.training.trainer import TrainConfig, train
from tests.training.test_trainer import regression_problem

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)


def board_scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def csv_rows(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def train_regression(
    run_dir, steps: int, resume: bool = False, tensorboard: bool | None = None, crash_at: int = 0
):
    data, regression_loss = regression_problem()
    calls = 0

    def loss_fn(model, batch):
        nonlocal calls
        calls += 1
        if calls == crash_at:
            raise RuntimeError("crash")
        return regression_loss(model, batch)

    config = TrainConfig(
        max_steps=steps,
        log_every=1,
        eval_every=2,
        checkpoint_every=3,
        lr=0.05,
        schedule="constant",
        tensorboard=tensorboard,
    )
    return train(
        nn.Linear(3, 1),
        loss_fn=loss_fn,
        batches=lambda epoch, start: data[start:],
        config=config,
        evaluate=lambda: {"valid_loss": 1.0},
        run_dir=run_dir,
        resume=resume,
    )


def test_tensorboard_holds_what_the_csv_holds(tmp_path):
    train_regression(tmp_path, 6)
    board, rows = board_scalars(tmp_path), csv_rows(tmp_path)
    assert {"train_loss", "lr", "tokens_per_s", "minutes", "valid_loss"} <= set(board)
    for tag in ("train_loss", "lr", "valid_loss"):
        expected = [(int(r["step"]), float(r[tag])) for r in rows if r[tag]]
        got = board[tag]
        assert [s for s, _ in got] == [s for s, _ in expected]
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6)


def test_a_resume_drops_the_lost_steps_from_tensorboard_too(tmp_path, monkeypatch):
    # A run that crashes in step 6 after logging step 5, its last checkpoint at step 3: the
    # resume replays steps 4-5.
    with pytest.raises(RuntimeError, match="crash"):
        train_regression(tmp_path, 8, crash_at=6)
    assert max(s for s, _ in board_scalars(tmp_path)["train_loss"]) == 5
    # TensorBoard reads event files in name order, "events.out.tfevents.<second>.<host>.<pid>.
    # <writer number>": a real resume is a later process, so its file's second sorts it after
    # the crashed run's. Here both writers live in this process, maybe in one second, and the
    # writer number sorts as text (".10" before ".9"): the resume's writer is dated later.
    from tensorboard.summary.writer import event_file_writer

    clock = event_file_writer.time
    monkeypatch.setattr(event_file_writer, "time", SimpleNamespace(time=lambda: clock.time() + 5))
    train_regression(tmp_path, 8, resume=True)
    steps = [s for s, _ in board_scalars(tmp_path)["train_loss"]]
    assert steps == list(range(1, 9))  # each step once, none lost or repeated
    assert [int(r["step"]) for r in csv_rows(tmp_path) if r["train_loss"]] == steps


def test_false_writes_no_event_files_and_true_needs_the_package(tmp_path, monkeypatch):
    train_regression(tmp_path / "off", 2, tensorboard=False)
    assert not (tmp_path / "off" / "tensorboard").exists()
    monkeypatch.setattr(metrics_log, "tensorboard_available", lambda: False)
    with pytest.raises(ValueError, match="tensorboard package is not installed"):
        MetricsLog(tmp_path / "metrics.csv", tensorboard=True)
    MetricsLog(tmp_path / "auto" / "metrics.csv", tensorboard=None)
    assert not (tmp_path / "auto" / "tensorboard").exists()  # unset, not installed: CSV only

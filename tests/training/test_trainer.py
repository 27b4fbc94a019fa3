"""The training engine: budgets on either clock, snapshots at their marks, early stopping, weight
decay groups, the metrics log, and that it actually optimises."""

import csv
import time

import pytest
import torch
from torch import nn

from qkv.training import trainer as trainer_module
from qkv.training.trainer import CLOCKS, TrainConfig, parameter_groups, train


def regression_problem(n_batches: int = 4):
    torch.manual_seed(0)
    true_w = torch.randn(3, 1)
    data = []
    for _ in range(n_batches):
        x = torch.randn(16, 3)
        data.append((x, x @ true_w))

    def loss_fn(model, batch):
        x, y = batch
        return ((model(x) - y) ** 2).sum(), torch.tensor(x.shape[0])

    return data, loss_fn


class FakeClock:
    """Advances by ``tick`` seconds every time it is read."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_it_optimises_a_linear_regression():
    data, loss_fn = regression_problem()
    model = nn.Linear(3, 1)
    with torch.no_grad():
        before = sum(float(loss_fn(model, b)[0]) for b in data)
    config = TrainConfig(max_steps=300, lr=0.05, schedule="constant", warmup_steps=0)
    result = train(model, loss_fn=loss_fn, batches=lambda epoch: data, config=config)
    with torch.no_grad():
        after = sum(float(loss_fn(model, b)[0]) for b in data)
    assert result.steps == 300 and result.stopped == "max_steps"
    assert after < 1e-3 * before


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_snapshots_fire_once_per_mark_in_order_and_the_budget_stops_the_run(monkeypatch, clock):
    fake = FakeClock(tick=6.0)  # read once per step (log rows are off): 6 s per step
    monkeypatch.setitem(CLOCKS, clock, fake)
    data, loss_fn = regression_problem()
    seen = []
    config = TrainConfig(
        max_minutes=1.0, clock=clock, snapshot_minutes=(0.5, 0.25, 1.0), log_every=1000
    )
    result = train(
        nn.Linear(3, 1),
        loss_fn=loss_fn,
        batches=lambda epoch: data,
        config=config,
        on_snapshot=lambda minutes, step: seen.append((minutes, step)),
    )
    assert [m for m, _ in seen] == [0.25, 0.5, 1.0]
    steps = [s for _, s in seen]
    assert steps == sorted(steps) and len(set(steps)) == 3
    assert result.stopped == "max_minutes" and result.steps == steps[-1]
    assert result.clock_seconds >= 60


def test_the_cpu_clock_is_the_process_cpu_time():
    assert CLOCKS["cpu"] is time.process_time and CLOCKS["wall"] is time.perf_counter
    assert trainer_module.CLOCKS is CLOCKS


def test_early_stopping_after_patience_and_on_best_only_on_improvement(tmp_path):
    data, loss_fn = regression_problem()
    scores = iter([3.0, 2.0, 2.5, 2.4, 2.6, 1.0])
    best_calls = []
    config = TrainConfig(max_steps=1000, eval_every=2, patience=3, log_every=1)
    result = train(
        nn.Linear(3, 1),
        loss_fn=loss_fn,
        batches=lambda epoch: data,
        config=config,
        evaluate=lambda: {"valid_loss": next(scores)},
        on_best=lambda metrics: best_calls.append(metrics["valid_loss"]),
        run_dir=tmp_path,
    )
    assert result.stopped == "early_stopping" and result.steps == 10
    assert best_calls == [3.0, 2.0] and result.best == {"step": 4, "valid_loss": 2.0}
    with open(tmp_path / "metrics.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {"step", "train_loss", "lr", "tokens_per_s", "minutes", "valid_loss"} <= set(rows[0])
    assert [r["valid_loss"] for r in rows if r["valid_loss"]] == ["3.0", "2.0", "2.5", "2.4", "2.6"]


def test_no_weight_decay_on_biases_norms_and_embeddings():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4), nn.LayerNorm(4))
    decay, no_decay = parameter_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert [p is model[1].weight for p in decay["params"]] == [True]
    ids = {id(p) for p in no_decay["params"]}
    assert ids == {id(model[0].weight), id(model[1].bias), id(model[2].weight), id(model[2].bias)}


def test_tied_parameters_are_optimised_once():
    embedding = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = embedding.weight
    groups = parameter_groups(nn.ModuleList([embedding, head]), 0.1)
    assert sum(len(g["params"]) for g in groups) == 1


@pytest.mark.parametrize(
    "values, name",
    [
        ({"clock": "sundial"}, "train.clock"),
        ({"snapshot_minutes": (10, -1)}, "train.snapshot_minutes"),
        ({"snapshot_minutes": (float("nan"),)}, "train.snapshot_minutes"),
        ({"max_minutes": 0}, "train.max_minutes"),
        ({"schedule": "linear"}, "train.schedule"),
        ({"lr": 0}, "train.lr"),
    ],
)
def test_bad_settings_name_the_key(values, name):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        TrainConfig(**values)


def test_empty_training_data_is_an_error():
    _, loss_fn = regression_problem()
    with pytest.raises(ValueError, match="no batch"):
        train(nn.Linear(3, 1), loss_fn=loss_fn, batches=lambda epoch: [], config=TrainConfig())

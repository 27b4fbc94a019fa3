"""The training engine: budgets on either clock, snapshots at their marks, early stopping, weight
decay groups, the metrics log, and that it actually optimises."""

import csv
import json
import signal
import time

import pytest
import torch
from torch import nn

from qkv.training import trainer as trainer_module
from qkv.training.checkpoint import CheckpointError
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
    result = train(model, loss_fn=loss_fn, batches=lambda epoch, start: data[start:], config=config)
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
        batches=lambda epoch, start: data[start:],
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
        batches=lambda epoch, start: data[start:],
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
        train(
            nn.Linear(3, 1), loss_fn=loss_fn, batches=lambda epoch, start: [], config=TrainConfig()
        )


def dropout_problem():
    """A model whose steps consume random numbers (dropout), and 4 batches per epoch."""
    torch.manual_seed(1)
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(4)]

    def make_model():
        torch.manual_seed(2)  # the same initial weights in every run
        return nn.Sequential(nn.Linear(3, 16), nn.Dropout(0.5), nn.Linear(16, 1))

    def loss_fn(model, batch):
        x, y = batch
        return ((model(x) - y) ** 2).sum(), torch.tensor(x.shape[0])

    return make_model, data, loss_fn


def run(tmp_path, max_steps, *, resume=False, make_model, data, loss_fn, **kwargs):
    model = make_model()
    config = TrainConfig(
        max_steps=max_steps, lr=0.01, warmup_steps=3, checkpoint_every=3, log_every=1, **kwargs
    )
    result = train(
        model,
        loss_fn=loss_fn,
        batches=lambda epoch, start: data[start:],
        config=config,
        run_dir=tmp_path,
        resume=resume,
    )
    return model, result


@pytest.mark.parametrize("stop_at", [5, 4, 3])  # mid-epoch; end of an epoch; on a checkpoint
def test_resume_is_bit_exact(tmp_path, stop_at):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    reference, _ = run(tmp_path / "straight", 10, **problem)
    # The interrupted run: it stops at `stop_at` (its final checkpoint), then resumes.
    run(tmp_path / "stopped", stop_at, **problem)
    resumed, result = run(tmp_path / "stopped", 10, resume=True, **problem)
    assert result.steps == 10
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with open(tmp_path / "stopped" / "metrics.csv", encoding="utf-8") as handle:
        steps = [int(r["step"]) for r in csv.DictReader(handle)]
    assert steps == list(range(1, 11))  # one row per step, none repeated or lost


def test_resume_from_a_periodic_checkpoint_after_a_crash(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    reference, _ = run(tmp_path / "straight", 10, **problem)

    def crashing(model, batch, calls=[0]):  # noqa: B006 - counts calls across steps
        calls[0] += 1
        if calls[0] == 8:
            raise RuntimeError("simulated crash in step 8")
        return loss_fn(model, batch)

    with pytest.raises(RuntimeError, match="simulated crash"):
        run(tmp_path / "crashed", 10, make_model=make_model, data=data, loss_fn=crashing)
    assert (tmp_path / "crashed" / "checkpoints" / "step-000000006").is_dir()
    resumed, _ = run(tmp_path / "crashed", 10, resume=True, **problem)
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_sigint_finishes_the_step_checkpoints_and_resumes_exactly(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    reference, _ = run(tmp_path / "straight", 10, **problem)
    calls = [0]

    def interrupted(model, batch):
        calls[0] += 1
        if calls[0] == 5:
            signal.raise_signal(signal.SIGINT)  # arrives in the middle of step 5
        return loss_fn(model, batch)

    model = make_model()
    config = TrainConfig(max_steps=10, lr=0.01, warmup_steps=3, checkpoint_every=3)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN under a shell's background job
    result = train(
        model,
        loss_fn=interrupted,
        batches=lambda epoch, start: data[start:],
        config=config,
        run_dir=tmp_path / "stopped",
        handle_signals=True,
    )
    assert result.stopped == "interrupted" and result.signal == "SIGINT" and result.steps == 5
    assert signal.getsignal(signal.SIGINT) is before  # handler restored
    resumed, _ = run(tmp_path / "stopped", 10, resume=True, **problem)
    for a, b in zip(reference.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    with pytest.raises(CheckpointError, match="nothing to resume"):
        run(tmp_path, 10, resume=True, make_model=make_model, data=data, loss_fn=loss_fn)


def test_a_checkpoint_for_another_model_is_a_clear_error(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    run(tmp_path, 3, make_model=make_model, data=data, loss_fn=loss_fn)
    with pytest.raises(CheckpointError, match=r"do not fit|do not match"):
        run(
            tmp_path,
            6,
            resume=True,
            data=data,
            loss_fn=loss_fn,
            make_model=lambda: nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1)),
        )


def test_accumulating_two_batches_equals_one_batch_holding_both():
    torch.manual_seed(3)
    pairs = [(torch.randn(n, 3), torch.randn(n, 1)) for n in (5, 11, 7, 9)]  # unequal sizes
    merged = [
        (torch.cat([pairs[i][0], pairs[i + 1][0]]), torch.cat([pairs[i][1], pairs[i + 1][1]]))
        for i in (0, 2)
    ]

    def loss_fn(model, batch):
        x, y = batch
        return ((model(x) - y) ** 2).sum(), torch.tensor(x.shape[0])

    def fit(data, accumulate):
        torch.manual_seed(4)
        model = nn.Linear(3, 1)
        config = TrainConfig(max_steps=6, lr=0.05, warmup_steps=0, accumulate=accumulate)
        train(
            model,
            loss_fn=loss_fn,
            batches=lambda epoch, start: data[start:],
            config=config,
            count_tokens=lambda batch: batch[0].shape[0],
        )
        return model

    a, b = fit(pairs, accumulate=2), fit(merged, accumulate=1)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)


def test_accumulation_needs_token_counts():
    data, loss_fn = regression_problem()
    with pytest.raises(ValueError, match="count_tokens"):
        train(
            nn.Linear(3, 1),
            loss_fn=loss_fn,
            batches=lambda epoch, start: data[start:],
            config=TrainConfig(accumulate=2),
        )


def test_bf16_autocast_trains_and_keeps_float32_weights():
    data, loss_fn = regression_problem()
    model = nn.Linear(3, 1)
    with torch.no_grad():
        before = sum(float(loss_fn(model, b)[0]) for b in data)
    config = TrainConfig(
        max_steps=200, lr=0.05, schedule="constant", warmup_steps=0, precision="bf16"
    )
    seen = []

    def watched(model, batch):
        out = model(batch[0])
        seen.append(out.dtype)
        return ((out - batch[1]) ** 2).sum(), torch.tensor(batch[0].shape[0])

    train(model, loss_fn=watched, batches=lambda epoch, start: data[start:], config=config)
    with torch.no_grad():
        after = sum(float(loss_fn(model, b)[0]) for b in data)
    assert set(seen) == {torch.bfloat16}  # the forward ran under autocast
    assert model.weight.dtype == torch.float32  # the weights did not
    assert after < 0.05 * before


@pytest.mark.parametrize(
    "values, message",
    [
        ({"precision": "fp16", "device": "cpu"}, "fp16 needs a CUDA device"),
        ({"device": "cuda:7"}, "PyTorch sees"),
    ],
)
def test_unavailable_precision_or_device_is_a_clear_error(values, message):
    if torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    data, loss_fn = regression_problem()
    with pytest.raises(ValueError, match=message):
        train(
            nn.Linear(3, 1),
            loss_fn=loss_fn,
            batches=lambda epoch, start: data[start:],
            config=TrainConfig(**values),
        )


@pytest.mark.parametrize(
    "values, name", [({"precision": "fp8"}, "train.precision"), ({"device": "tpu"}, "train.device")]
)
def test_bad_precision_or_device_names_the_key(values, name):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        TrainConfig(**values)


@pytest.mark.slow  # inductor compiles C++ for the forward and backward graphs: a minute or so
def test_compiled_training_matches_eager():
    data, loss_fn = regression_problem()

    def fit(compile_):
        torch.manual_seed(5)
        model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        config = TrainConfig(max_steps=20, lr=0.01, warmup_steps=0, compile=compile_)
        train(model, loss_fn=loss_fn, batches=lambda epoch, start: data[start:], config=config)
        return model

    eager, compiled = fit(False), fit(True)
    for p, q in zip(eager.parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-4)


def test_saving_the_same_step_again_never_replaces_the_checkpoint_in_use(tmp_path):
    make_model, data, loss_fn = dropout_problem()
    problem = dict(make_model=make_model, data=data, loss_fn=loss_fn)
    first, _ = run(tmp_path, 3, **problem)
    again, result = run(tmp_path, 3, resume=True, **problem)  # finished: saves step 3 again
    assert result.steps == 3
    pointer = json.loads((tmp_path / "checkpoints" / "latest.json").read_text())
    assert pointer["checkpoint"] == "step-000000003-1"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest.json",
        "step-000000003-1",
    ]
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)

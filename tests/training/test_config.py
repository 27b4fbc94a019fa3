"""The ``train:`` section: every setting is read by someone (the engine, or for the two task
settings the task), every shipped YAML and every saved run configuration still builds a
:class:`TrainConfig`, and the budget clock counts what a resumed run had already spent."""

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

from qkv.training import config as config_module
from qkv.training.config import CLOCKS, TASK_SETTINGS, BudgetClock, TrainConfig

ROOT = Path(__file__).resolve().parents[2]
ENGINE = Path(config_module.__file__).parent  # src/qkv/training
FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def settings_read(files) -> set[str]:
    """The ``TrainConfig`` fields read as ``config.NAME`` or ``....config.NAME`` in ``files``."""
    read = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in FIELDS:
                owner = node.value
                name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
                if name == "config":
                    read.add(node.attr)
    return read


def test_the_engine_reads_every_setting_but_the_task_settings():
    engine = settings_read(ENGINE.glob("*.py"))
    assert engine == FIELDS - set(TASK_SETTINGS)


def test_the_task_settings_are_read_by_the_tasks():
    tasks = (ROOT / "src" / "qkv" / "tasks").rglob("*.py")
    sources = "\n".join(path.read_text(encoding="utf-8") for path in tasks)
    for name in TASK_SETTINGS:
        assert f".{name}" in sources, name


@pytest.mark.parametrize(
    "path", sorted(ROOT.glob("configs/**/*.yaml")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_shipped_train_section_builds_a_train_config(path):
    """Each file's train section builds its task's train config (TrainConfig, or the task's
    subclass of it that adds the weights of its loss)."""
    from qkv.tasks.registry import task

    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    section_class = task(raw.get("task", "translation")).sections["train"]
    assert issubclass(section_class, TrainConfig)
    section_class(**(raw.get("train") or {}))


def test_a_saved_train_section_loads_back_with_the_task_settings():
    saved = dataclasses.asdict(TrainConfig(batch_tokens=1024, label_smoothing=0.2, max_steps=9))
    assert TrainConfig(**saved) == TrainConfig(batch_tokens=1024, label_smoothing=0.2, max_steps=9)


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 10.0
        return self.now


def test_the_budget_clock_continues_a_resumed_run_and_fires_each_mark_once(monkeypatch):
    monkeypatch.setitem(CLOCKS, "wall", Ticks())
    config = TrainConfig(max_minutes=1.0, snapshot_minutes=(0.5, 1.0, 0.25))
    budget = BudgetClock(config, spent=20.0, marks_done=[0.25])  # start: 10 - 20 = -10
    assert budget.seconds() == 30.0  # read at 20
    assert budget.marks_passed(30.0) == [0.5] and budget.marks_passed(30.0) == []
    assert not budget.expired(59.9) and budget.expired(60.0)
    assert budget.marks_passed(60.0) == [1.0] and budget.pending == []


def test_sgd_takes_a_plain_gradient_step_and_adamw_stays_the_default():
    import torch

    from qkv.training.optimiser import optimiser_and_schedule

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    before = [p.detach().clone() for p in model.parameters()]
    config = TrainConfig(optimizer="sgd", lr=0.1, schedule="constant", warmup_steps=0,
                         weight_decay=0.0)  # fmt: skip
    optimiser, _ = optimiser_and_schedule(model, config)
    assert type(optimiser) is torch.optim.SGD
    model(x).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimiser.step()
    for old, grad, new in zip(before, grads, model.parameters(), strict=True):
        torch.testing.assert_close(new.detach(), old - 0.1 * grad)  # no momentum
    assert type(optimiser_and_schedule(model, TrainConfig())[0]) is torch.optim.AdamW


def test_an_unknown_optimizer_is_named():
    with pytest.raises(ValueError, match=r"train\.optimizer must be one of adamw, sgd, got 'adam'"):
        TrainConfig(optimizer="adam")

"""Run directories written by an earlier qkv still load, evaluate, draw and resume.

``tests/fixtures/runs/`` holds one tiny run of every registered task, made by
``tests/fixtures/make_runs.py`` with the code as it was before the package layout changed, with
what that code printed when it evaluated each run and what it answered for one input. The code
of today must read the same directories and say the same things."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from qkv.cli.main import main
from qkv.tasks.registry import TASKS
from qkv.tasks.run_dir import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    """A copy of the fixture runs, as the working directory (their paths are relative)."""
    copy = tmp_path / "runs"
    shutil.copytree(FIXTURES, copy)
    monkeypatch.chdir(copy)
    return copy


def _same_text(got: str, expected: str) -> None:
    """Equal words; numbers equal to 1e-3 (another CPU may round a last digit differently)."""
    assert NUMBER.split(got) == NUMBER.split(expected), got
    for a, b in zip(NUMBER.findall(got), NUMBER.findall(expected), strict=True):
        assert float(a) == pytest.approx(float(b), rel=1e-3, abs=1e-3), (a, b, got)


def test_there_is_an_old_run_of_every_task():
    assert {path.name for path in FIXTURES.iterdir() if path.is_dir()} == {*TASKS, "data"}


@pytest.mark.parametrize("name", list(TASKS))
def test_an_old_run_loads_evaluates_and_resumes(name, runs, capsys):
    expected = json.loads((runs / f"{name}.expected.json").read_text(encoding="utf-8"))
    spec, runner = load_runner(name)
    assert spec.name == name
    item = runner.read_image(expected["input"]) if spec.input == "image" else expected["input"]
    seen = runner.views(item)
    _same_text(seen.summary, expected["summary"])
    assert [view.id for view in seen.views] == expected["views"]

    code = main(["evaluate", "--model", name, "--split", expected["split"], "--limit",
                 str(expected["limit"]), "--quiet"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    _same_text(out, expected["evaluate"])

    steps = _steps(runs / name)
    code = main(["train", "--resume", name, "--set", f"train.max_steps={steps + 1}", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("resuming ") and f"stopped after {steps + 1} steps" in out, out
    assert _steps(runs / name) == steps + 1


def _steps(run: Path) -> int:
    """The step of the run's latest checkpoint."""
    latest = json.loads((run / "checkpoints" / "latest.json").read_text(encoding="utf-8"))
    return int(latest["step"])

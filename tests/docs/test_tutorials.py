"""The tutorials (``docs/tutorials/*.py``) run: each in smoke mode (tiny budgets, the same code as
the full run, ``QKV_TUTORIAL_MODE=smoke``) in a fresh kernel, and each has its full run committed
beside it (the ``.ipynb`` that ``make tutorials`` writes, which the site shows) with the same cells
as its source, so a page never shows outputs of code that has since changed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("nbclient", reason="needs nbclient (pip install -e '.[dev]')")
pytest.importorskip("jupytext", reason="needs jupytext (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.py"))


def _notebooks():
    spec = importlib.util.spec_from_file_location("notebooks", ROOT / "tools" / "notebooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


notebooks = _notebooks()


def _errors(notebook) -> list[str]:
    return [
        f"{o.ename}: {o.evalue}"
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


def test_there_are_tutorials():
    assert TUTORIALS, "no tutorial in docs/tutorials/"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_a_tutorial_runs_in_smoke_mode(path):
    notebook = notebooks.execute(notebooks.read(path), mode="smoke", threads=1)
    assert _errors(notebook) == []
    displays = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
                if o.output_type in ("display_data", "execute_result", "stream")]  # fmt: skip
    assert displays, "a tutorial that shows nothing"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_a_tutorial_has_its_full_run_committed_with_the_same_cells(path):
    import nbformat

    committed = path.with_suffix(".ipynb")
    assert committed.is_file(), f"run `make tutorials` to write {committed.name}"
    ran = nbformat.read(committed, as_version=4)
    source = notebooks.read(path)
    assert [(c.cell_type, c.source) for c in ran.cells] == [
        (c.cell_type, c.source) for c in source.cells
    ], f"{committed.name} is older than {path.name}: run `make tutorials`"
    assert _errors(ran) == []
    assert ran.metadata.get("qkv", {}).get("mode") == "full", "committed from a smoke run"
    code = [c for c in ran.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a cell of the committed run did not run"


def test_the_switch_refuses_a_mode_it_does_not_know():
    with pytest.raises(ValueError, match="mode must be one of"):
        notebooks.execute(notebooks.read(TUTORIALS[0]), mode="fast")

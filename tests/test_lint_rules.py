"""The rules ``make lint`` checks by machine can fail: each checker, run on a deliberate
violation in a temporary tree, reports it (and passes the same tree without it).

* import-linter with the repository's own contracts (``[tool.importlinter]``), on a stand-in
  ``qkv`` package that has every layer: an upward import, an import between independent
  siblings, a cycle of three modules;
* mypy with the repository's configuration (``[tool.mypy]``), on a file with a type error;
* ``tools/check_sizes.py`` on a function and a file over their sizes.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_sizes = _load_tool("check_sizes")


# --- import-linter -------------------------------------------------------------------------------


def _layer_packages() -> list[str]:
    """The packages the repository's layers contract names, siblings included."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.split("|")]


def _lint_imports(tmp_path: Path, imports: dict[str, str]) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's contracts over a stand-in ``qkv`` under
    ``tmp_path``: an empty package per layer, plus ``imports`` (module -> what it imports)."""
    pytest.importorskip("importlinter")
    script = Path(sys.executable).with_name("lint-imports")
    if not script.exists():
        pytest.skip("lint-imports is not installed beside this Python")
    package = tmp_path / "qkv"
    for name in ["", *_layer_packages()]:
        (package / name).mkdir(parents=True, exist_ok=True)
        (package / name / "__init__.py").write_text("")
    for module, imported in imports.items():
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(f"def f():\n    import {imported}\n" if imported else "")
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    return subprocess.run(
        [str(script), "--config", "pyproject.toml", "--no-cache"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_linter_passes_imports_that_flow_down(tmp_path):
    result = _lint_imports(
        tmp_path,
        {"qkv.models.model": "qkv.layers.block", "qkv.layers.block": "qkv.attention.core",
         "qkv.attention.core": "qkv.io", "qkv.io": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("importer", "imported", "message"),
    [
        # An upward import, inside a function (import-linter counts those too).
        ("qkv.attention.core", "qkv.models", "qkv.attention is not allowed to import qkv.models"),
        # Independent siblings of one layer.
        ("qkv.viz.heatmap", "qkv.data", "qkv.viz is not allowed to import qkv.data"),
    ],
)
def test_layers_contract_fails_on_a_forbidden_import(tmp_path, importer, imported, message):
    result = _lint_imports(tmp_path, {importer: imported})
    assert result.returncode == 1
    assert "qkv layers BROKEN" in result.stdout
    assert message in result.stdout


def test_no_cycles_contract_fails_on_a_cycle_of_three_modules(tmp_path):
    result = _lint_imports(
        tmp_path,
        {"qkv.models.a": "qkv.models.b", "qkv.models.b": "qkv.models.c",
         "qkv.models.c": "qkv.models.a"},
    )  # fmt: skip
    assert result.returncode == 1
    assert "no import cycles BROKEN" in result.stdout
    assert "qkv layers KEPT" in result.stdout
    assert "No cycles are allowed in qkv.models." in result.stdout


# --- mypy ----------------------------------------------------------------------------------------


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    path = tmp_path / "example.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PYPROJECT),
         "--cache-dir", str(tmp_path / "cache"), str(path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_mypy_fails_on_a_type_error(tmp_path):
    result = _mypy(tmp_path, "def name(n: int) -> str:\n    return n\n")
    assert result.returncode == 1
    assert 'Incompatible return value type (got "int", expected "str")' in result.stdout


def test_mypy_asks_every_type_ignore_for_its_code(tmp_path):
    result = _mypy(tmp_path, "def name(n: int) -> str:\n    return n  # type: ignore\n")
    assert result.returncode == 1
    assert "[ignore-without-code]" in result.stdout
    coded = "def name(n: int) -> str:\n    return n  # type: ignore[return-value]  # a reason\n"
    assert _mypy(tmp_path, coded).returncode == 0


# --- sizes ---------------------------------------------------------------------------------------


def _function(name: str, lines: int, *, above: str = "") -> str:
    """A function whose body has ``lines`` lines of code, with a docstring, blank lines and
    comments that do not count."""
    body = "".join(f"    x{i} = {i}\n\n    # comment {i}\n" for i in range(lines - 1))
    return f'{above}def {name}():\n    """Doc.\n\n    string."""\n{body}    return 0\n'


def _problems(text: str, name: str = "example.py") -> list[str]:
    return list(check_sizes.size_problems(Path(name), text))


def test_size_rules_count_lines_of_code_only():
    assert _problems(_function("f", check_sizes.MAX_FUNCTION_LINES)) == []


def test_size_rules_fail_on_a_long_function():
    (problem,) = _problems(_function("f", check_sizes.MAX_FUNCTION_LINES + 1))
    assert problem.startswith("example.py:1: function f has 81 lines of code (max 80)")


def test_size_rules_fail_on_a_long_method_inside_a_class():
    method = _function("m", 90, above="@staticmethod\n").replace("\n", "\n    ")
    (problem,) = _problems(f"class C:\n    {method}")
    assert "function m has 90 lines of code" in problem


def test_a_reason_above_the_def_allows_a_long_function():
    reason = "# size: one loop over shared tensors\n"
    assert _problems(_function("f", 100, above=reason)) == []
    assert _problems(_function("f", 100, above=reason + "@decorator\n")) == []
    assert len(_problems(_function("f", 100, above="# size:\n"))) == 1  # a reason, not a tag


def test_size_rules_fail_on_a_long_file_unless_a_reason_heads_it():
    text = '"""Doc."""\n' + "x = 1\n" * check_sizes.MAX_FILE_LINES
    (problem,) = _problems(text)
    assert problem.startswith("example.py:1: 451 lines (max 450)")
    assert _problems("# size: one table of presets\n" + text) == []


def test_check_sizes_main_reports_and_exits_1(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(_function("f", 10))
    assert check_sizes.main([str(tmp_path)]) == 0
    (tmp_path / "long.py").write_text(_function("g", 200))
    assert check_sizes.main([str(tmp_path)]) == 1
    assert "long.py:1: function g has 200 lines of code" in capsys.readouterr().out

"""The rules of ARCHITECTURE.md that code can check: outside ``qkv.tasks`` no code names a task
(the CLI and the explorer ask the registry), and no two modules import each other (imports
inside functions included)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from qkv.tasks.registry import TASKS

SRC = Path(__file__).resolve().parents[1] / "src" / "qkv"


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def test_no_code_outside_the_tasks_names_a_task():
    named = [
        f"{module}:{node.lineno} {node.value!r}"
        for module, tree in _modules().items()
        if not module.startswith("qkv.tasks")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in TASKS
    ]
    assert not named, f"ask qkv.tasks.registry instead of naming a task: {named}"


def _imports(tree: ast.Module) -> set[str]:
    """Every qkv module (or name in one) that ``tree`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("qkv"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("qkv"))
    return found


def test_no_two_modules_import_each_other():
    modules = _modules()
    imports = {name: _imports(tree) for name, tree in modules.items()}
    pairs = [
        (a, b)
        for a, b in itertools.combinations(sorted(modules), 2)
        if b in imports[a] and a in imports[b]
    ]
    assert not pairs


def test_the_checks_above_can_fail():
    tree = ast.parse("from qkv.b import x\ndef f():\n    from qkv.a import y\n    return 'tagging'")
    assert {"qkv.b", "qkv.a"} <= _imports(tree)
    assert any(isinstance(n, ast.Constant) and n.value in TASKS for n in ast.walk(tree))

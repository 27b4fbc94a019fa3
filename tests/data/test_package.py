"""``qkv.data``'s lazy face: the same names as ever, each imported from its module on first use."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import qkv.data


def test_importing_one_module_imports_no_other():
    code = (
        "import sys, qkv.data.errors, qkv.data.images\n"
        "print(*sorted(m for m in sys.modules if m.startswith('qkv')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "qkv",
        "qkv.data",
        "qkv.data.errors",
        "qkv.data.images",
        "qkv.lazy",
    ]


def test_every_exported_name_comes_from_its_module():
    assert "load_corpus" in dir(qkv.data) and "SubwordTokenizer" in dir(qkv.data)
    for name in qkv.data.__all__:
        module = importlib.import_module(qkv.data._EXPORTS[name])
        assert getattr(qkv.data, name) is getattr(module, name), name
    images = importlib.import_module("qkv.data.images")
    assert images.read_image is importlib.import_module("qkv.data.images.files").read_image


def test_what_type_checkers_see_is_what_is_exported():
    tree = ast.parse(Path(qkv.data.__file__).read_text(encoding="utf-8"))
    guard = next(node for node in tree.body if isinstance(node, ast.If))
    seen = {alias.name: node.module for node in guard.body for alias in node.names}
    assert seen == qkv.data._EXPORTS

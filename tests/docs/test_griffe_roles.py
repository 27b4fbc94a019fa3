"""``tools/griffe_roles.py`` rewrites a docstring's Sphinx roles as the cross-references
mkdocstrings resolves (and the strict build checks): each case on a small package written here,
loaded by griffe with the extension as the site loads qkv; and a misspelt role fails a strict
``mkdocs build`` of a one-page site, with the file and line named."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe", reason="the site needs the docs extra")

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
from griffe_roles import SphinxRoles  # noqa: E402

# A package whose docstrings use each form. ``helper`` exists in the module and as a method of
# ``Store``: a method's ``:func:`helper``` is the class's, as Sphinx looks in the class first.
MOD = '''
"""The module: :class:`Store`, :func:`helper`, :mod:`zipfile`, :class:`torch.Tensor`,
:func:`~torch.nn.functional.scaled_dot_product_attention` and :func:`atend`."""

import torch


def helper():
    """Module-level helper: :meth:`Store.load`, :class:`~pkg.mod.Store`
    and :func:`pkg.mod.helper`."""


def _private():
    """Private."""


def undocumented():
    pass


class Store:
    """A store: :meth:`load`, :attr:`size`, :func:`_private` and :func:`undocumented`."""

    size: int = 0
    """Entries."""

    def load(self):
        """Load; see :meth:`helper` and :meth:`Sub.load <pkg.other.Sub.load>`."""

    def helper(self):
        """The method of the same name as the module's function."""
'''
OTHER = '''
"""Another module: :class:`Store` (imported), :meth:`.Sub.load` (inherited),
:func:`.mod.helper` (found by suffix) and :class:`.Missing`."""

from pkg.mod import Store


class Sub(Store):
    """A subclass."""
'''


@pytest.fixture
def package(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""The package."""\n', encoding="utf-8")
    (tmp_path / "pkg" / "mod.py").write_text(MOD, encoding="utf-8")
    (tmp_path / "pkg" / "other.py").write_text(OTHER, encoding="utf-8")
    return tmp_path


def _load(root: Path, linked: list[str] | None = None):
    extensions = griffe.load_extensions(SphinxRoles(linked=linked))
    return griffe.load("pkg", search_paths=[str(root)], extensions=extensions)


def test_roles_become_references_resolved_as_sphinx_resolves_them(package):
    pkg = _load(package)
    mod, other = pkg["mod"], pkg["other"]
    assert mod["helper"].docstring.value == (
        "Module-level helper: [`Store.load`][pkg.mod.Store.load], [`Store`][pkg.mod.Store]\n"
        "and [`pkg.mod.helper`][pkg.mod.helper]."
    )  # relative to the module; a tilde shows the last name; a full name as written
    assert mod["Store"]["load"].docstring.value == (
        "Load; see [`helper`][pkg.mod.Store.helper] and [`Sub.load`][pkg.mod.Store.load]."
    )  # the class before the module; a title; an inherited method at its defining class
    assert other.docstring.value == (
        "Another module: [`Store`][pkg.mod.Store] (imported), [`Sub.load`][pkg.mod.Store.load] "
        "(inherited),\n[`mod.helper`][pkg.mod.helper] (found by suffix) and [`Missing`][Missing]."
    )  # an import is followed to where the name is defined


def test_outside_names_become_code_and_unknown_ones_stay_references_with_a_warning(package, caplog):
    with caplog.at_level(logging.WARNING):
        pkg = _load(package)
    assert pkg["mod"].docstring.value == (
        "The module: [`Store`][pkg.mod.Store], [`helper`][pkg.mod.helper], `zipfile`, "
        "`torch.Tensor`,\n`scaled_dot_product_attention` and [`atend`][atend]."
    )
    warned = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert len(warned) == 2, warned
    assert "pkg/mod.py:3: :func:`atend` names nothing in pkg.mod, its module" in warned[0]
    assert "pkg/other.py:3: :class:`.Missing` names nothing in pkg.other," in warned[1]


def test_names_no_page_shows_become_code_but_private_ones_stay_references(package):
    store = _load(package)["mod"]["Store"]
    assert store.docstring.value == (
        "A store: [`load`][pkg.mod.Store.load], [`size`][pkg.mod.Store.size], "
        "[`_private`][pkg.mod._private] and `undocumented`."
    )  # undocumented: off the page, so code; private: a reference for autorefs to refuse
    linked_elsewhere = _load(package, linked=["pkg.other"])["mod"]["helper"]
    assert linked_elsewhere.docstring.value == (
        "Module-level helper: `Store.load`, `Store`\nand `pkg.mod.helper`."
    )


def _build(root: Path, docstring: str) -> subprocess.CompletedProcess:
    """A strict ``mkdocs build`` of one page showing a module whose function has ``docstring``,
    the extension loaded by path as mkdocs.yml loads it."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text('"""Pkg."""\n', encoding="utf-8")
    source = (
        f'"""Mod."""\n\n\ndef attend():\n    """Attend."""\n\n\ndef f():\n    """{docstring}"""\n'
    )
    (root / "src" / "pkg" / "mod.py").write_text(source, encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# API\n\n::: pkg.mod\n", encoding="utf-8")
    config = textwrap.dedent(f"""\
        site_name: t
        theme: {{name: material, font: false}}
        plugins:
          - mkdocstrings:
              handlers:
                python:
                  paths: [src]
                  options:
                    show_source: false
                    extensions: ["{TOOLS / "griffe_roles.py"}:SphinxRoles"]
        """)
    (root / "mkdocs.yml").write_text(config, encoding="utf-8")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("spelt", ["attend", "atend"])
def test_a_misspelt_role_fails_the_strict_build(tmp_path, spelt):
    pytest.importorskip("mkdocstrings_handlers.python", reason="the site needs the docs extra")
    built = _build(tmp_path, f"Calls :func:`{spelt}`.")
    output = built.stdout + built.stderr
    if spelt == "attend":
        assert built.returncode == 0, output
        page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
        assert 'href="#pkg.mod.attend"' in page and ":func:" not in page
    else:
        assert built.returncode != 0
        assert "src/pkg/mod.py:9: :func:`atend` names nothing" in output, output
        assert "Could not find cross-reference target 'atend'" in output, output

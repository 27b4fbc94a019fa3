"""Docstring harvesting: extraction by hand, skipped directories and encodings, the sources
(never imported, versioned, a missing default skipped) and the cache."""

from __future__ import annotations

import ast
import json
import logging
import platform
import sys

import pytest

from qkv.data import DataError
from qkv.data.pairs import docstring_harvest
from qkv.data.pairs.docstring_harvest import (
    harvest_functions,
    harvest_tree,
    source_versions,
    split_docstring,
)
from qkv.data.pairs.docstrings import load_docstrings

PKG = "qkv_demo_docs"  # a package that exists only in tmp_path; never imported

SHAPES = '''\
import functools


@functools.lru_cache
def decorated(a, b):
    """Add two numbers together.

    Longer text about the addition.

    Parameters
    ----------
    a : int
        The first.
    """
    return a + b  # the sum


class Shape:
    """A class docstring is not a function's."""

    def area(self):
        """Return the area of the shape."""  # a comment after it
        return 0

    async def wait(self):
        \'\'\'Wait for the shape
        to be drawn.

        Then return.
        \'\'\'
        await self.draw()

    def one_line(self): "Return two on one line."; return 2

    class Inner:
        def deep(self):
            """Go deeper into the class."""
            return "é"


def outer():
    """Build an inner function.
    It is returned.
    """

    def inner(é=1):
        """Return é plus one.

        Unicode before the column offsets.
        """
        return é + 1

    return inner


def not_a_string():
    42
    return 1


def bytes_first():
    b"not a docstring"


def fstring_first():
    f"not {1} a docstring"


def no_summary():
    """This first paragraph runs on
    over two lines without a period
    """


def no_docstring():
    return None
'''

OUTER_CODE = """\
def outer():

    def inner(é=1):
        \"\"\"Return é plus one.

        Unicode before the column offsets.
        \"\"\"
        return é + 1

    return inner"""
EXPECTED_SHAPES = [  # (qualname, line, summary, body, code)
    (
        "decorated",
        5,
        "Add two numbers together.",
        "Longer text about the addition.\n\nParameters\na : int\n    The first.",
        "def decorated(a, b):\n    return a + b  # the sum",
    ),
    (
        "Shape.area",
        21,
        "Return the area of the shape.",
        "",
        "def area(self):\n    # a comment after it\n    return 0",
    ),
    (
        "Shape.wait",
        25,
        "Wait for the shape to be drawn.",
        "Then return.",
        "async def wait(self):\n    await self.draw()",
    ),
    ("Shape.one_line", 33, "Return two on one line.", "", "def one_line(self): return 2"),
    ("Shape.Inner.deep", 36, "Go deeper into the class.", "", 'def deep(self):\n    return "é"'),
    (
        "outer",
        41,
        "Build an inner function.",
        "It is returned.",
        OUTER_CODE,
    ),
    (
        "outer.<locals>.inner",
        46,
        "Return é plus one.",
        "Unicode before the column offsets.",
        "def inner(é=1):\n    return é + 1",
    ),
]

BODY = "This body has more than eight words in it, as the rule needs."


def function(name: str, summary: str, body: str = BODY, code: str = "return 1") -> str:
    doc = f'"""{summary}\n\n    {body}\n    """' if body else f'"""{summary}"""'
    return f"def {name}():\n    {doc}\n    {code}\n\n\n"


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """A fake installed package ``PKG`` (version 1.0) under tmp_path, and an empty qkv cache."""
    site = tmp_path / "site"
    root = site / PKG
    (root / "tests").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "__init__.py").write_text(
        'raise RuntimeError("harvesting must not import this")\n\n\n'
        + function("top", "Return the top of the package.")
    )
    (root / "shapes.py").write_text(SHAPES, encoding="utf-8")
    (root / "sub" / "mod.py").write_text(function("deep_one", "Return the deep one here."))
    (root / "tests" / "test_x.py").write_text(function("test_it", "Test the thing in a test."))
    (root / "broken.py").write_text("def f(:\n")
    (root / "legacy.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n"
        + function("menu", "Return the caf\xe9 menu.").encode("latin-1")
    )
    dist = site / f"{PKG}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PKG}\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("QKV_CACHE", str(tmp_path / "cache"))
    return root


def all_pairs(corpus):
    return corpus.train + corpus.valid + corpus.test


# --------------------------------------------------------------------- extraction by hand


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Return x.", ("Return x.", "")),
        ("  Return x  ", ("Return x", "")),
        (
            "Return x.\n\n    Body.\n\n    Notes\n    -----\n    More.",
            ("Return x.", "Body.\n\nNotes\nMore."),
        ),
        ("Return x\n    over two lines.\n\n    Body.", ("Return x over two lines.", "Body.")),
        ("Return x.\n    Next line.\n    Third.", ("Return x.", "Next line.\nThird.")),
        ("Return x\n    over two\n    or three lines.", None),
        ("Return x\n    without a period", None),
        ("", None),
        ("\n   \n", None),
    ],
)
def test_split_docstring_by_hand(raw, expected):
    assert split_docstring(raw) == expected


def test_harvest_tree_extracts_summary_body_and_code_by_hand(tmp_path):
    (tmp_path / "shapes.py").write_text(SHAPES, encoding="utf-8")
    found = harvest_tree(tmp_path, "demo")
    assert [(f.qualname, f.line, f.summary, f.body, f.code) for f in found] == EXPECTED_SHAPES
    assert {(f.package, f.module, f.path) for f in found} == {("demo", "demo.shapes", "shapes.py")}
    for f in found:  # every code parses alone as one function without a docstring
        node = ast.parse(f.code).body[0]
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        assert ast.get_docstring(node) is None


def test_harvest_tree_modules_skips_and_encodings(demo):
    found = harvest_tree(demo, PKG)
    assert {
        (f.module, f.path, f.qualname) for f in found if f.qualname in ("top", "deep_one", "menu")
    } == {
        (PKG, "__init__.py", "top"),
        (f"{PKG}.sub.mod", "sub/mod.py", "deep_one"),
        (f"{PKG}.legacy", "legacy.py", "menu"),
    }
    assert "Return the café menu." in {f.summary for f in found}
    assert not any(f.path.startswith("tests/") or f.path == "broken.py" for f in found)
    assert {f.module for f in harvest_tree(demo, "stdlib", module_prefix="")} >= {"sub.mod", ""}
    with pytest.raises(DataError, match="not a directory"):
        harvest_tree(demo / "nowhere", PKG)


# --------------------------------------------------------------------- the sources


def test_sources_are_never_imported(demo):
    corpus = load_docstrings(packages=PKG)
    assert PKG not in sys.modules
    assert "4 files (1 unreadable skipped), 11 documented functions, 10 with a" in corpus.split_note
    assert source_versions(PKG) == {PKG: "1.0"}
    assert source_versions(["python", PKG])["python"] == platform.python_version()


def test_default_sources_skip_a_missing_package(demo, monkeypatch, caplog):
    monkeypatch.setattr(docstring_harvest, "DEFAULT_PACKAGES", (PKG, "qkv_absent_pkg"))
    with caplog.at_level(logging.WARNING, logger="qkv.data.pairs.docstring_harvest"):
        corpus = load_docstrings(packages=(PKG, "qkv_absent_pkg"))
    assert "qkv_absent_pkg is not installed" in caplog.text
    assert f"from {PKG} 1.0:" in corpus.split_note and "qkv_absent_pkg" not in corpus.split_note


# --------------------------------------------------------------------- the cache


def test_cache_round_trip_is_keyed_by_version(demo, tmp_path):
    first = load_docstrings("code", packages=PKG)
    [cached] = (tmp_path / "cache" / "docstrings").glob(f"{PKG}-1.0-py*.json")
    (demo / "later.py").write_text(function("later", "Return a function added later."))
    assert load_docstrings("code", packages=PKG) == first  # read from the cache, not the tree
    assert "Return a function added later." not in {f.summary for f in harvest_functions(PKG)}
    dist = demo.parent / f"{PKG}-1.0.dist-info" / "METADATA"
    dist.write_text(dist.read_text().replace("Version: 1.0", "Version: 1.1"))
    later = load_docstrings("code", packages=PKG)
    assert "Return a function added later." in {s for _, s in all_pairs(later)}
    assert "1.1" in later.split_note and cached.is_file()


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: "{not json",
        lambda doc: json.dumps({**doc, "functions": [[*doc["functions"][0][:7], "5"]]}),
        lambda doc: json.dumps({**doc, "counts": None}),
        lambda doc: json.dumps([1, 2]),
    ],
)
def test_damaged_cache_is_harvested_again(demo, tmp_path, caplog, damage):
    fresh = harvest_functions(PKG)
    [cached] = (tmp_path / "cache" / "docstrings").glob("*.json")
    cached.write_text(damage(json.loads(cached.read_text())))
    with caplog.at_level(logging.WARNING, logger="qkv.data.pairs.docstring_harvest"):
        assert harvest_functions(PKG) == fresh
    assert "is damaged" in caplog.text
    assert len(json.loads(cached.read_text())["functions"]) == len(fresh)

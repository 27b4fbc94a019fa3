"""Docstring summaries: extraction by hand, the pair rules, the split by file, the cache, and the
standard library of the running Python."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import platform
import re
import sys
from collections import Counter

import pytest

from qkv.data import DataError, DatasetUnavailable, corpus_options, docstrings, load_corpus
from qkv.data.docstrings import (
    docstring_split_of,
    first_sentence,
    harvest_functions,
    harvest_tree,
    load_docstrings,
    name_words,
    source_versions,
    split_docstring,
)

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


def dropped(corpus, rule: str) -> int:
    return int(re.search(rf"\b{rule} ([\d,]+)", corpus.split_note).group(1).replace(",", ""))


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


def test_sources_are_never_imported(demo):
    corpus = load_docstrings(packages=PKG)
    assert PKG not in sys.modules
    assert "4 files (1 unreadable skipped), 11 documented functions, 10 with a" in corpus.split_note
    assert source_versions(PKG) == {PKG: "1.0"}
    assert source_versions(["python", PKG])["python"] == platform.python_version()


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("def getSourceLines(self):\n    pass", "get source lines"),
        ("def get_source_lines(x): pass", "get source lines"),
        ("async def HTTPServer2go(): pass", "http server 2 go"),
        ("def __init__(self):\n    pass", "init"),
        ("def _private_parseURL(): pass", "private parse url"),
        ("def café_menu(): pass", "café menu"),
        ("    def method(self): pass", "method"),
    ],
)
def test_name_words_by_hand(code, words):
    assert name_words(code) == words


def test_name_words_refuses_code_without_a_function():
    with pytest.raises(DataError, match=r"no 'def NAME' in 'x = 1'"):
        name_words("x = 1")


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("Compute it. Then more.", "Compute it."),
        ("Compute it,\n  e.g. with x. Then more.", "Compute it, e.g. with x."),
        ("Is it (really)? Yes.", "Is it (really)?"),
        ('He said "stop." Then left.', 'He said "stop."'),
        ("No period here\nat all\n\nNext paragraph.", "No period here at all"),
        ("Call np.sum on it. Done.", "Call np.sum on it."),
        ("", ""),
    ],
)
def test_first_sentence_by_hand(text, sentence):
    assert first_sentence(text) == sentence


# --------------------------------------------------------------------- rules, dedup, split


def test_each_rule_drops_what_it_names(demo):
    (demo / "shapes.py").unlink()
    long_summary = " ".join(["word"] * 41) + "."
    (demo / "rules.py").write_text(
        function("two_words", "Two words.")
        + function("too_long", long_summary)
        + function("see_other", "See the other function for details.")
        + function("see_if", "See if the thing holds true.")
        + function("alias", "Alias for the thing over there.")
        + function("short_body", "Return a value that is fine.", body="Too short a body.")
        + function("stub", "Compute the thing for subclasses.", code="raise NotImplementedError")
        + function("repeated", "Return the answer to it.", body="Return the answer to it. " + BODY)
        + function(
            "long_code",
            "Return a long computation result.",
            code="x = 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9",
        )
    )
    text = load_docstrings("text", packages=PKG, max_source_words=15)
    code = load_docstrings("code", packages=PKG, max_source_words=15)
    text_summaries = {summary for _, summary in all_pairs(text)}
    code_summaries = {summary for _, summary in all_pairs(code)}
    assert {"See if the thing holds true.", "Compute the thing for subclasses."} <= text_summaries
    assert "Return a value that is fine." in code_summaries - text_summaries
    assert "Compute the thing for subclasses." not in code_summaries
    assert "Return a long computation result." not in code_summaries
    assert not {"Two words.", long_summary, "Alias for the thing over there."} & text_summaries
    assert (dropped(text, "short_summary"), dropped(text, "long_summary")) == (1, 1)
    assert (dropped(text, "boilerplate"), dropped(code, "boilerplate")) == (2, 2)
    assert (dropped(text, "short_body"), dropped(text, "repeated_summary")) == (1, 1)
    assert (dropped(code, "stub"), dropped(code, "long_source")) == (1, 1)
    assert dropped(text, "long_source") == 0 and "short_body" not in code.split_note
    assert "Return a long computation result." in {
        s for _, s in all_pairs(load_docstrings("code", packages=PKG, max_source_words=None))
    }


def file_in(split: str, stem: str) -> str:
    """The first file name ``{stem}{i}.py`` that :func:`docstring_split_of` puts in ``split``."""
    return next(
        f"{stem}{i}.py" for i in range(10_000) if docstring_split_of(PKG, f"{stem}{i}.py") == split
    )


def test_duplicates_are_dropped_across_files_and_splits(demo):
    (demo / file_in("train", "a")).write_text(function("same", "Return the very same thing."))
    (demo / file_in("test", "b")).write_text(function("same", "Return the very same thing."))
    body = "Compute The Sum of all the values given to this function."
    (demo / file_in("train", "c")).write_text(function("total", "Add the numbers up now.", body))
    (demo / file_in("valid", "d")).write_text(
        function("total2", "Sum the numbers up now.", body.lower().replace(" ", "   "))
    )
    for kind in ("text", "code"):
        corpus = load_docstrings(kind, packages=PKG)
        summaries = Counter(summary for _, summary in all_pairs(corpus))
        assert summaries["Return the very same thing."] == 1
        assert dropped(corpus, "duplicate") == 1
    text = load_docstrings("text", packages=PKG)
    assert "Sum the numbers up now." not in {s for _, s in all_pairs(text)}
    assert "Add the numbers up now." in {s for _, s in text.train}
    assert dropped(text, "source_in_earlier_split") == 1
    assert len(set(all_pairs(text))) == len(all_pairs(text))


def test_split_is_by_file_and_the_documented_hash(demo):
    for i in range(60):
        (demo / f"m{i}.py").write_text(
            function(f"f{i}", f"Return value number {i} here.")
            + function(f"g{i}", f"Return other value {i} here.")
        )
    corpus = load_docstrings("code", packages=PKG)  # every code differs (text: one body)
    seen = set()
    for split in ("train", "valid", "test"):
        for _, summary in corpus.split(split):
            number = re.search(r"\d+", summary)
            if number and summary.startswith("Return "):
                path = f"m{number.group()}.py"
                assert docstring_split_of(PKG, path) == split
                seen.add((path, split))
    assert len({path for path, _ in seen}) == len(seen) == 60  # each file in exactly one split
    assert {split for _, split in seen} == {"train", "valid", "test"}
    for package, path in [
        ("python", "json/__init__.py"),
        (PKG, "m7.py"),
        ("torch", "nn/modules/linear.py"),
    ]:
        r = int.from_bytes(hashlib.sha256(f"{package}/{path}".encode()).digest()[:8], "big") % 100
        assert docstring_split_of(package, path) == (
            "train" if r < 90 else "valid" if r < 95 else "test"
        )
    pinned = [("json/__init__.py", "train"), ("asyncio/events.py", "valid"), ("ast.py", "test")]
    assert [docstring_split_of("python", path) for path, _ in pinned] == [s for _, s in pinned]
    fractions = Counter(docstring_split_of("p", f"f{i}.py") for i in range(4000))
    assert 3500 < fractions["train"] < 3700 and 150 < fractions["valid"] < 250


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
    with caplog.at_level(logging.WARNING, logger="qkv.data.docstrings"):
        assert harvest_functions(PKG) == fresh
    assert "is damaged" in caplog.text
    assert len(json.loads(cached.read_text())["functions"]) == len(fresh)


# --------------------------------------------------------------------- options and errors


def test_options_are_checked(demo):
    with pytest.raises(DataError, match=r"unknown docstring pair kind 'prose'.*'text'.*'code'"):
        load_docstrings("prose", packages=PKG)
    for bad in (0, True, 2.5, "400"):
        with pytest.raises(DataError, match=r"max_source_words must be an integer >= 1"):
            load_docstrings(packages=PKG, max_source_words=bad)
    for bad, message in [
        ("no-such", "not a top-level"),
        ([], "packages is empty"),
        ("python,python", r"\['python'\] more than once"),
    ]:
        with pytest.raises(DataError, match=message):
            load_docstrings(packages=bad)
    with pytest.raises(
        DatasetUnavailable, match=r"'qkv_absent_pkg' is not installed.*pip install qkv_absent_pkg"
    ):
        load_docstrings(packages=[PKG, "qkv_absent_pkg"])


def test_default_sources_skip_a_missing_package(demo, monkeypatch, caplog):
    monkeypatch.setattr(docstrings, "DEFAULT_PACKAGES", (PKG, "qkv_absent_pkg"))
    with caplog.at_level(logging.WARNING, logger="qkv.data.docstrings"):
        corpus = load_docstrings(packages=(PKG, "qkv_absent_pkg"))
    assert "qkv_absent_pkg is not installed" in caplog.text
    assert f"from {PKG} 1.0:" in corpus.split_note and "qkv_absent_pkg" not in corpus.split_note


def test_registry_loads_the_corpus(demo):
    assert corpus_options("docstrings") == ["kind", "packages", "max_source_words"]
    corpus = load_corpus("docstrings", kind="code", packages=PKG)
    assert (corpus.name, corpus.source_lang, corpus.target_lang) == (
        "docstrings-code",
        "code",
        "summary",
    )
    assert corpus == load_docstrings("code", packages=PKG)


# --------------------------------------------------------------------- the standard library


@pytest.fixture(scope="module")
def stdlib():
    """Both kinds over the running Python's standard library (harvested once into qkv's cache)."""
    return {kind: load_docstrings(kind, packages="python") for kind in ("text", "code")}


def trivial(statement: ast.stmt) -> bool:
    """``pass``, ``...`` or ``raise NotImplementedError``: what a stub is made of."""
    if isinstance(statement, ast.Raise):
        return "NotImplementedError" in ast.unparse(statement)
    return isinstance(statement, ast.Pass) or ast.unparse(statement) == "..."


@pytest.mark.parametrize("kind", ["text", "code"])
def test_stdlib_pairs_keep_the_rules(stdlib, kind):
    corpus = stdlib[kind]
    sizes = corpus.sizes()
    assert sizes["train"] > 1500 and sizes["valid"] > 40 and sizes["test"] > 40, sizes
    assert (
        f"Python {platform.python_version()} from python {platform.python_version()}:"
        in corpus.split_note
    )
    pairs = all_pairs(corpus)
    assert len(set(pairs)) == len(pairs)
    for source, summary in pairs:
        assert source.strip() and "\n" not in summary and 3 <= len(summary.split()) <= 40
        assert not docstrings.BOILERPLATE.match(summary) and len(source.split()) <= 400
        if kind == "text":
            assert len(source.split()) >= 8
        else:  # one function without its docstring, and not a stub
            node = ast.parse(source).body[0]
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            assert ast.get_docstring(node) is None and not all(map(trivial, node.body))
    keys = {
        split: {" ".join(s.split()).casefold() for s, _ in corpus.split(split)}
        for split in ("train", "valid", "test")
    }
    assert not (
        keys["train"] & keys["valid"]
        or keys["train"] & keys["test"]
        or keys["valid"] & keys["test"]
    )


def test_stdlib_pairs_sit_in_their_files_split(stdlib):
    functions = harvest_functions("python")
    split_of = {}
    for f in functions:
        split_of.setdefault((f.code, f.summary), set()).add(docstring_split_of(f.package, f.path))
    for split in ("train", "valid", "test"):
        for pair in stdlib["code"].split(split):
            assert split in split_of[pair]  # the split of (one of) the files it comes from
    dumps = [f for f in functions if (f.module, f.qualname) == ("json", "dumps")]
    assert [f.path for f in dumps] == ["json/__init__.py"]
    assert not any({"test", "tests", "idle_test"} & set(f.path.split("/")[:-1]) for f in functions)
    assert dumps[0].code.startswith("def dumps(") and dumps[0].summary not in dumps[0].code

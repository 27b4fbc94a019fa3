"""Docstring summaries: the pair rules, the split by file, the loader's options, the extractive
baselines, and the pairs of the standard library of the running Python."""

from __future__ import annotations

import ast
import hashlib
import platform
import re
from collections import Counter

import pytest

from qkv.data import DataError, DatasetUnavailable, corpus_options, load_corpus
from qkv.data.pairs import docstrings
from qkv.data.pairs.docstring_harvest import harvest_functions
from qkv.data.pairs.docstrings import (
    docstring_split_of,
    first_sentence,
    load_docstrings,
    name_words,
)
from tests.data.pairs import test_docstring_harvest
from tests.data.pairs.test_docstring_harvest import BODY, PKG, all_pairs, function

demo = test_docstring_harvest.demo  # the fake installed package (a fixture)


def dropped(corpus, rule: str) -> int:
    return int(re.search(rf"\b{rule} ([\d,]+)", corpus.split_note).group(1).replace(",", ""))


# --------------------------------------------------------------------- extractive baselines


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

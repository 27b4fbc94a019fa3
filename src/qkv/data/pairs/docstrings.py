"""Docstring summaries: (docstring body -> summary) and (code -> summary) pairs from Python sources.

The functions come from :mod:`qkv.data.pairs.docstring_harvest` (the summary line PEP 257 asks a
docstring to open with, the rest of the docstring, and the function's code without it, harvested
with :mod:`ast` from the standard library and installed packages, cached); its public names are
re-exported here. The code side follows Iyer et al. 2016, "Summarizing Source Code using a Neural
Attention Model". This module holds the pair rules, the split by file, the loader and two
extractive baselines (:func:`name_words`, :func:`first_sentence`).

Pairs (:func:`load_docstrings`): ``kind="text"`` is body -> summary, ``kind="code"`` code ->
summary. A pair is dropped by the first of these rules it breaks (the counts are logged and
written in ``split_note``): a summary under 3 or over 40 words; a boilerplate summary
(:data:`BOILERPLATE`: "See ...", "Alias for", "Deprecated", "Same as", "Equivalent to",
"Override base"); a body under 8 words (text) or a stub (code: nothing but ``pass``, ``...`` or
``raise NotImplementedError`` besides the docstring); the summary repeated as the body's
:func:`first_sentence` (text); a source over ``max_source_words`` whitespace-separated words
(400 by default); an exact duplicate of an earlier (source, summary) pair (sources in the order
given, then path and line order; the first is kept).

Split by file: every file goes wholly to one split by :func:`docstring_split_of`, ``r =
int.from_bytes(sha256(f"{package}/{path}".encode()).digest()[:8], "big") % 100`` with ``path``
relative to the package's root: ``r < 90`` train, ``r < 95`` valid, else test. Duplicates go
before splitting; then a valid or test pair whose normalised source (whitespace collapsed, case
folded) occurs in an earlier split (train, then valid) is dropped.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import platform
import re
from collections.abc import Callable, Sequence

from qkv.data.errors import DataError
from qkv.data.pairs.docstring_harvest import (
    COUNTS,
    DEFAULT_PACKAGES,
    FORMAT_VERSION,
    SKIP_DIRS,
    STDLIB,
    DocFunction,
    _load_source,
    _sources,
    harvest_functions,
    harvest_tree,
    source_versions,
    split_docstring,
)
from qkv.data.pairs.parallel import Pair, ParallelCorpus

__all__ = [
    "BOILERPLATE",
    "DEFAULT_PACKAGES",
    "DOCSTRING_KINDS",
    "FORMAT_VERSION",
    "MAX_SOURCE_WORDS",
    "SKIP_DIRS",
    "STDLIB",
    "DocFunction",
    "docstring_split_of",
    "first_sentence",
    "harvest_functions",
    "harvest_tree",
    "load_docstrings",
    "name_words",
    "source_versions",
    "split_docstring",
]

logger = logging.getLogger(__name__)

DOCSTRING_KINDS = {"text": "doc", "code": "code"}
"""Pair kind -> the corpus's ``source_lang``."""
MIN_SUMMARY_WORDS, MAX_SUMMARY_WORDS, MIN_BODY_WORDS, MAX_SOURCE_WORDS = 3, 40, 8, 400
BOILERPLATE = re.compile(
    r"see (?!if |whether )|alias (for|of) |\**deprecated\b|same as |equivalent to |override base ",
    re.IGNORECASE,
)
"""Summary openings that point elsewhere instead of summarising (matched at the start)."""
VALID_FROM, TEST_FROM, N_BUCKETS = 90, 95, 100
SPLITS = ("train", "valid", "test")


# --------------------------------------------------------------------- pairs and splits

_STUB_END = re.compile(r"(^\s*|:\s*|\bpass\s*|\.\.\.\s*|\braise NotImplementedError\b.*)(#.*)?$")


def _is_stub(code: str) -> bool:
    """Whether the function does nothing but ``pass``, ``...`` or ``raise NotImplementedError``
    besides its docstring; a cheap look at its last line spares most functions a parse."""
    if "NotImplementedError" not in code and not _STUB_END.search(code.rsplit("\n", 1)[-1]):
        return False
    try:
        function = ast.parse(code).body[0]
    except SyntaxError:  # a signature alone: the docstring was the whole body
        return True
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)  # a function's source
    for statement in function.body:
        exc = getattr(statement, "exc", None)
        if not (
            isinstance(statement, ast.Pass)
            or (isinstance(statement, ast.Expr) and getattr(statement.value, "value", 0) is ...)
            or getattr(getattr(exc, "func", exc), "id", "") == "NotImplementedError"
        ):
            return False
    return True


Rule = Callable[[DocFunction, str], bool]
"""``(function, source) -> True`` when the pair breaks the rule."""

_KIND_RULES: dict[str, tuple[Callable[[DocFunction], str], tuple[tuple[str, Rule], ...]]] = {
    "text": (
        lambda function: function.body,
        (
            ("short_body", lambda _, source: len(source.split()) < MIN_BODY_WORDS),
            ("repeated_summary", lambda f, source: first_sentence(source) == f.summary),
        ),
    ),
    "code": (lambda function: function.code, (("stub", lambda _, source: _is_stub(source)),)),
}
"""Pair kind -> (the source of a function's pair, the rules only that kind has, in order)."""


def _broken_rule(
    function: DocFunction, rules: tuple[tuple[str, Rule], ...], source: str,
    max_words: int | None,
) -> str:  # fmt: skip
    """The first rule (module docstring) that the pair of ``function`` breaks, or ``""``:
    the summary's, then the kind's own ``rules``, then the source's length."""
    n_words = len(function.summary.split())
    if n_words < MIN_SUMMARY_WORDS or n_words > MAX_SUMMARY_WORDS:
        return "short_summary" if n_words < MIN_SUMMARY_WORDS else "long_summary"
    if BOILERPLATE.match(function.summary):
        return "boilerplate"
    for name, broken in rules:
        if broken(function, source):
            return name
    if max_words is not None and len(source.split()) > max_words:
        return "long_source"
    return ""


def docstring_split_of(package: str, path: str) -> str:
    """``"train"``, ``"valid"`` or ``"test"``: the split of every function of the file ``path``
    (relative to the root of the source ``package``)."""
    digest = hashlib.sha256(f"{package}/{path}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % N_BUCKETS
    return "train" if bucket < VALID_FROM else "valid" if bucket < TEST_FROM else "test"


def _split(
    functions: Sequence[DocFunction], kind: str, max_words: int | None
) -> tuple[dict[str, list[Pair]], dict[str, int], dict[str, int]]:
    """(pairs per split, pairs dropped per rule, files per split)."""
    source_of, kind_rules = _KIND_RULES[kind]
    rules = ("short_summary", "long_summary", "boilerplate", *(name for name, _ in kind_rules),
             "long_source", "duplicate")  # fmt: skip
    dropped = dict.fromkeys((*rules, "source_in_earlier_split"), 0)
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    files: dict[str, set[str]] = {name: set() for name in SPLITS}
    seen: set[Pair] = set()
    for function in functions:
        pair = (source_of(function), function.summary)
        rule = _broken_rule(function, kind_rules, pair[0], max_words)
        if rule or pair in seen:
            dropped[rule or "duplicate"] += 1
            continue
        seen.add(pair)
        split = docstring_split_of(function.package, function.path)
        splits[split].append(pair)
        files[split].add(f"{function.package}/{function.path}")
    earlier: set[str] = set()
    for name in SPLITS:
        keys = [" ".join(source.split()).casefold() for source, _ in splits[name]]
        kept = [pair for pair, key in zip(splits[name], keys, strict=True) if key not in earlier]
        dropped["source_in_earlier_split"] += len(splits[name]) - len(kept)
        splits[name] = kept
        earlier.update(keys)
    return splits, dropped, {name: len(paths) for name, paths in files.items()}


def load_docstrings(
    kind: str = "text",
    packages: Sequence[str] | str = DEFAULT_PACKAGES,
    max_source_words: int | None = MAX_SOURCE_WORDS,
) -> ParallelCorpus:
    """Docstring pairs: ``kind="text"`` body -> summary, ``kind="code"`` code -> summary.

    Args:
        kind: ``"text"`` or ``"code"`` (:data:`DOCSTRING_KINDS`).
        packages: the sources, a sequence or a comma-separated string: ``"python"`` (the
            standard library) and installed packages' top-level names. The default skips a
            package that is not installed, with a warning; ``split_note`` names the sources
            read and their versions.
        max_source_words: drop pairs whose source has more whitespace-separated words, from
            every split (it defines the data set; the card's counts use 400); ``None`` keeps all.

    Returns:
        a :class:`ParallelCorpus` named ``docstrings-{kind}``, ``source_lang`` ``"doc"`` or
        ``"code"``, ``target_lang`` ``"summary"``, split by file (module docstring). Bodies and
        code keep their line breaks; a summary is one line.

    Raises:
        DataError: an unknown kind (the kinds listed), ``max_source_words`` not an integer
            >= 1, or a bad package name.
        DatasetUnavailable: a named package that is not installed (the pip command given).
    """
    if kind not in DOCSTRING_KINDS:
        raise DataError(
            f"unknown docstring pair kind {kind!r}; kinds: 'text' (docstring body -> summary), "
            "'code' (function code -> summary)"
        )
    if max_source_words is not None and (type(max_source_words) is not int or max_source_words < 1):
        raise DataError(
            f"max_source_words must be an integer >= 1 or None, got {max_source_words!r}"
        )
    sources = _sources(packages)
    functions: list[DocFunction] = []
    totals = dict.fromkeys(COUNTS, 0)
    for source in sources:
        harvested, counts = _load_source(source)
        functions += harvested
        totals = {key: totals[key] + counts[key] for key in COUNTS}
    splits, dropped, files = _split(functions, kind, max_source_words)
    sizes = {name: len(pairs) for name, pairs in splits.items()}
    logger.info("docstrings-%s: %s pairs, %s dropped, %s files", kind, sizes, dropped, files)
    note = (
        f"harvested with ast under Python {platform.python_version()} from "
        f"{', '.join(f'{s.name} {s.version}' for s in sources)}: {totals['files']:,} files "
        f"({totals['unreadable_files']} unreadable skipped), {totals['documented']:,} documented "
        f"functions, {len(functions):,} with a summary line; pairs dropped: "
        f"{', '.join(f'{rule} {n:,}' for rule, n in dropped.items())} (max_source_words="
        f"{max_source_words}); split by file: r = int.from_bytes(sha256(f'{{package}}/{{path}}'"
        ".encode()).digest()[:8], 'big') % 100, r < 90 train, r < 95 valid, else test; files "
        f"{'/'.join(f'{files[s]:,}' for s in SPLITS)}, pairs "
        f"{'/'.join(f'{sizes[s]:,}' for s in SPLITS)} train/valid/test"
    )
    return ParallelCorpus(
        name=f"docstrings-{kind}",
        source_lang=DOCSTRING_KINDS[kind],
        target_lang="summary",
        split_note=note,
        **splits,
    )


# --------------------------------------------------------------------- extractive baselines

_DEF_NAME = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_NAME_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SENTENCE_END = re.compile(r"[.!?][)\]\"'`]*$")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "resp.", "approx.", "esp."})


def name_words(code: str) -> str:
    """The name of the function defined in ``code`` as lower-case words, snake_case and
    camelCase split: ``def getSourceLines(`` -> ``"get source lines"``, ``HTTPServer`` ->
    ``"http server"``, ``__init__`` -> ``"init"``.

    Raises:
        DataError: ``code`` defines no function.
    """
    match = _DEF_NAME.search(code)
    if match is None:
        raise DataError(f"name_words: no 'def NAME' in {code[:40]!r}; pass a code pair's source")
    words = []
    for part in filter(None, match.group(1).split("_")):
        pieces = _NAME_PART.findall(part)
        words += pieces if "".join(pieces) == part else [part]  # other letters: kept whole
    return " ".join(words).lower()


def first_sentence(text: str) -> str:
    """The first sentence of ``text``'s first paragraph, whitespace collapsed: up to the first
    word ending in ``.``, ``!`` or ``?`` (closing brackets or quotes may follow) that is not an
    abbreviation such as ``e.g.``; the whole paragraph when no word ends a sentence."""
    words: list[str] = []
    for word in re.split(r"\n[ \t]*\n", text.strip(), maxsplit=1)[0].split():
        words.append(word)
        if _SENTENCE_END.search(word) and word.lower() not in _ABBREVIATIONS:
            break
    return " ".join(words)

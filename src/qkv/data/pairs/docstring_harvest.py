"""Docstring harvesting: the documented functions of Python sources, found with :mod:`ast`.

PEP 257 asks a docstring to open with a one-line summary, written by a person, then a blank line
and a longer description; the function's code is what the summary summarises. This module finds
those functions; :mod:`qkv.data.pairs.docstrings` turns them into pairs. The functions are
harvested at
run time from the Python sources on the machine, parsed with :mod:`ast` and never imported:
``"python"``, the standard library of the running interpreter
(``sysconfig.get_paths()["stdlib"]``), and installed packages found with
``importlib.util.find_spec`` and versioned with ``importlib.metadata`` (by default ``numpy`` and
``torch``). Directories in :data:`SKIP_DIRS` (tests, vendored copies of other packages,
``site-packages``) and ``testing/_internal`` (torch's test harness) are skipped, and so is a
file that does not decode or parse. Nothing is copied into the repository.

Extraction (:func:`harvest_tree`), for every ``def`` and ``async def`` with a docstring, in
classes and in other functions too (``qualname`` as Python writes it: ``f.<locals>.g``):

- **summary** (:func:`split_docstring`): the first paragraph of the cleaned docstring when it is
  one line; when it is longer, its first line if that ends with a period, else its first two
  lines joined if the second ends with one, else the function is skipped. Whitespace collapsed.
- **body**: the rest of the docstring (:func:`inspect.cleandoc`), without the ``-----`` /
  ``=====`` lines that underline numpy-style section headers (the headers stay).
- **code**: the function's source from its ``def`` line to its end, the docstring statement
  removed and the ``def`` line's indentation taken off every line. Decorators are left out: they
  stand outside the ``def`` and often repeat the docstring's words (``@deprecated("use ...")``).

The harvested functions of each source (:func:`harvest_functions`) are cached as JSON in
``cache_dir()/docstrings`` (``$QKV_CACHE`` moves it), keyed by the source's version, the Python
version and :data:`FORMAT_VERSION`, written atomically; a damaged cache file is harvested again.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import platform
import re
import sysconfig
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.sources.packages import cache_dir
from qkv.io import atomic_write

__all__ = [
    "DEFAULT_PACKAGES",
    "FORMAT_VERSION",
    "SKIP_DIRS",
    "STDLIB",
    "DocFunction",
    "harvest_functions",
    "harvest_tree",
    "source_versions",
    "split_docstring",
]

logger = logging.getLogger(__name__)

STDLIB = "python"
"""The source name of the running interpreter's standard library."""
DEFAULT_PACKAGES = (STDLIB, "numpy", "torch")
FORMAT_VERSION = 1
"""Raised whenever extraction changes, so that older cache files are not read."""
SKIP_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__", "_vendor"})
SKIP_SUBPATHS = ("/testing/_internal",)
COUNTS = ("files", "unreadable_files", "documented", "no_summary")


@dataclass(frozen=True)
class DocFunction:
    """One documented function: where it is (``path`` relative to its package's root, ``line``
    of its ``def``), its summary line, the rest of its docstring and its code without it."""

    package: str
    module: str
    path: str
    qualname: str
    summary: str
    body: str
    code: str
    line: int


# --------------------------------------------------------------------- extraction

_Function = ast.FunctionDef | ast.AsyncFunctionDef
"""A function definition, the node a :class:`DocFunction` is read from."""

_UNDERLINE = re.compile(r"\s*(-{3,}|={3,})\s*")


def split_docstring(docstring: str) -> tuple[str, str] | None:
    """``(summary, body)`` of a raw docstring (module docstring), or ``None`` when it has no
    summary line: empty, or a first paragraph whose first two lines end without a period."""
    lines = inspect.cleandoc(docstring).splitlines()
    paragraph = []
    for line in lines:
        if not line.strip():
            break
        paragraph.append(line.strip())
    if not paragraph:
        return None
    n_lines = 1 if len(paragraph) == 1 or paragraph[0].endswith(".") else 2
    if n_lines == 2 and not paragraph[1].endswith("."):
        return None
    summary = " ".join(" ".join(paragraph[:n_lines]).split())
    rest = [line for line in lines[n_lines:] if not _UNDERLINE.fullmatch(line)]
    return summary, inspect.cleandoc("\n".join(rest))


def _definitions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, _Function]]:
    """``(qualname, node)`` of every function under ``node``, walking statements only."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _definitions(child, f"{prefix}{child.name}.<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _definitions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
            yield from _definitions(child, prefix)


def _code_without_docstring(text: str, starts: list[int], node: _Function, doc: ast.stmt) -> str:
    """The source of the function ``node`` from the start of its ``def`` line to the end of its
    last line, without the docstring statement ``doc``, dedented by the ``def`` line's indent."""
    # ast.parse gives every statement its end position; only hand-built nodes lack one.
    assert node.end_lineno is not None
    assert doc.end_lineno is not None and doc.end_col_offset is not None

    def offset(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        line = text[starts[lineno - 1] : starts[lineno]]
        return starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    head = text[starts[node.lineno - 1] : offset(doc.lineno, doc.col_offset)]
    tail = text[offset(doc.end_lineno, doc.end_col_offset) : starts[node.end_lineno] - 1]
    stripped, tail = head.rstrip(" \t"), tail.lstrip(" \t")
    if tail.startswith(";"):
        tail = tail[1:].lstrip(" \t")
    if tail.startswith("\n") or not tail:  # drop the line the docstring leaves empty
        code = stripped + (tail[1:] if stripped.endswith("\n") else tail)
    else:  # a comment or a statement followed the docstring on its line
        code = stripped + (head[len(stripped) :] if stripped.endswith("\n") else " ") + tail
    margin = head[: len(head) - len(head.lstrip(" \t"))]
    return "\n".join(line.removeprefix(margin) for line in code.rstrip().split("\n"))


def _python_files(root: Path) -> Iterator[Path]:
    """The ``.py`` files under ``root`` in sorted order, outside the skipped directories."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS and not f"/{(here / d).as_posix()}".endswith(SKIP_SUBPATHS)
        )
        yield from (Path(folder) / f for f in sorted(files) if f.endswith(".py"))


def _harvest(root: Path, package: str, prefix: str) -> tuple[list[DocFunction], dict[str, int]]:
    counts = dict.fromkeys(COUNTS, 0)
    functions = []
    for path in _python_files(root):
        relative = path.relative_to(root).as_posix()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences in old sources
                text = importlib.util.decode_source(path.read_bytes())  # coding cookie, newlines
                tree = ast.parse(text, filename=relative)
        except (SyntaxError, ValueError, OSError):  # UnicodeDecodeError is a ValueError
            counts["unreadable_files"] += 1
            logger.debug("skipping %s/%s: it does not decode or parse", package, relative)
            continue
        counts["files"] += 1
        parts = relative.removesuffix(".py").split("/")
        module = (prefix + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)).strip(".")
        starts = [0]
        for line in text.split("\n"):
            starts.append(starts[-1] + len(line) + 1)
        for qualname, node in _definitions(tree):
            docstring = ast.get_docstring(node, clean=False)
            counts["documented"] += docstring is not None
            parsed = None if docstring is None else split_docstring(docstring)
            if parsed is None:
                counts["no_summary"] += docstring is not None
                continue
            code = _code_without_docstring(text, starts, node, node.body[0])
            fields = (package, module, relative, qualname, *parsed, code, node.lineno)
            functions.append(DocFunction(*fields))
    return functions, counts


def harvest_tree(
    root: str | Path, package: str, *, module_prefix: str | None = None
) -> list[DocFunction]:
    """The documented functions with a summary line of every ``.py`` file under ``root``.

    ``package`` names the source in each :class:`DocFunction`; a module is its path relative to
    ``root``, dotted, behind ``module_prefix`` (default ``package + "."``; ``""`` for the
    standard library). Nothing is cached, nothing is imported.

    Raises:
        DataError: ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"harvest_tree: {root} is not a directory; pass a package's folder")
    return _harvest(root, package, f"{package}." if module_prefix is None else module_prefix)[0]


# --------------------------------------------------------------------- sources and the cache


@dataclass(frozen=True)
class _Source:
    name: str
    version: str
    root: Path
    prefix: str


def _package_names(packages: Sequence[str] | str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in packages.split(",")) if isinstance(packages, str) else ()
    names = names or tuple(packages)
    if not names:
        raise DataError(f"packages is empty; pass source names such as {DEFAULT_PACKAGES}")
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise DataError(
                f"packages: {name!r} is not a top-level package name; pass names such as "
                f"'numpy', or {STDLIB!r} for the standard library"
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(f"packages names {repeated} more than once; name each source once")
    return names


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:  # an import name that is not a dist's
        for distribution in importlib.metadata.packages_distributions().get(name, []):
            return importlib.metadata.version(distribution)
    raise DataError(
        f"package {name!r} has no distribution metadata, so its version (which the data set "
        f"records) is unknown; install it with `pip install {name}`"
    )


def _sources(packages: Sequence[str] | str) -> list[_Source]:
    names = _package_names(packages)
    sources = []
    for name in names:
        if name == STDLIB:
            stdlib = Path(sysconfig.get_paths()["stdlib"])
            sources.append(_Source(STDLIB, platform.python_version(), stdlib, ""))
            continue
        spec = importlib.util.find_spec(name)  # a top-level name: nothing is imported
        if spec is None and names == DEFAULT_PACKAGES:
            logger.warning("%s is not installed; harvesting the other default sources", name)
            continue
        if spec is None:
            raise DatasetUnavailable(
                f"package {name!r} is not installed; install it with `pip install {name}`, or "
                "leave it out of packages"
            )
        if not spec.submodule_search_locations:
            raise DataError(f"{name!r} is a single module ({spec.origin}); pass a package")
        root = Path(next(iter(spec.submodule_search_locations)))
        sources.append(_Source(name, _version(name), root, f"{name}."))
    return sources


def source_versions(packages: Sequence[str] | str = DEFAULT_PACKAGES) -> dict[str, str]:
    """``{source: version}`` of the sources that ``packages`` reads, e.g. ``{"python":
    "3.11.7", "numpy": "2.4.6", "torch": "2.13.0+cpu"}`` (``"python"``: the interpreter's)."""
    return {source.name: source.version for source in _sources(packages)}


def _load_source(source: _Source) -> tuple[list[DocFunction], dict[str, int]]:
    """The harvested functions and counts of ``source``, from the cache when it holds them."""
    header = {"format": FORMAT_VERSION, "source": source.name, "version": source.version}
    header["python"] = platform.python_version()
    key = f"{source.name}-{source.version}-py{header['python']}-format{FORMAT_VERSION}"
    path = cache_dir() / "docstrings" / f"{re.sub(r'[^A-Za-z0-9.+_-]', '_', key)}.json"
    if path.is_file():
        try:
            document = json.loads(path.read_bytes().decode("utf-8"))
            if {k: document[k] for k in header} != header:
                raise ValueError(f"it was written for {[document[k] for k in header]}")
            functions = [DocFunction(*row) for row in document["functions"]]
            for f in functions:  # every field a string, the line an int
                if [type(v) for v in astuple(f)] != [str] * 7 + [int]:
                    raise ValueError(f"a malformed record {str(astuple(f))[:60]}")
            return functions, {k: int(document["counts"][k]) for k in COUNTS}
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as error:
            logger.warning("%s is damaged (%s); harvesting %s again", path, error, source.name)
    started = time.perf_counter()
    functions, counts = _harvest(source.root, source.name, source.prefix)
    took = time.perf_counter() - started
    logger.info("harvested %s %s in %.1f s: %s", source.name, source.root, took, counts)
    document = {**header, "counts": counts, "functions": [astuple(f) for f in functions]}
    payload = json.dumps(document, ensure_ascii=False).encode("utf-8")
    atomic_write(path, lambda handle: handle.write(payload))
    return functions, counts


def harvest_functions(packages: Sequence[str] | str = DEFAULT_PACKAGES) -> list[DocFunction]:
    """The documented functions with a summary line of ``packages`` (``"python"``: the standard
    library), in source, path and line order; harvested once per version, then read from
    qkv's cache.

    Raises:
        DatasetUnavailable: a package that is not installed (unless ``packages`` is the
            default, which then skips it with a warning).
        DataError: a name that is not a top-level package, a repeated name, a single module.
    """
    return [f for source in _sources(packages) for f in _load_source(source)[0]]

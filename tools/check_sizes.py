"""Size rules for the library (``make lint``): no file under ``src/`` over 450 lines and no
function over 80 lines of code, unless a reason is written next to it.

* A function's size is the lines of its body that are neither blank nor only a comment, its
  docstring excluded (nested functions count toward the function that holds them). A comment line
  ``# size: <reason>`` right above the ``def`` (or above its first decorator) allows more.
* A file's size is its number of lines. ``# size: <reason>`` within its first 5 lines allows more.

Usage: ``python tools/check_sizes.py [PATH ...]`` (default ``src``); prints each offender as
``path:line: message`` and exits 1 when there is one.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
FILE_REASON_LINES = 5  # where a file's `# size:` reason may stand
REASON = re.compile(r"^\s*#\s*size:\s*\S")


def function_code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: Sequence[str]) -> int:
    """Lines of ``node``'s body that are neither blank nor only a comment, docstring excluded."""
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # the docstring (a function of only a docstring has no code to count)
    first, last = body[0].lineno, node.end_lineno or body[-1].lineno
    code = (lines[i - 1].strip() for i in range(first, last + 1))
    return sum(1 for line in code if line and not line.startswith("#"))


def _has_reason_above(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: Sequence[str]) -> bool:
    starts = {node.lineno, *(d.lineno for d in node.decorator_list)}
    top = min(starts)
    return top >= 2 and bool(REASON.match(lines[top - 2]))


def size_problems(path: Path, text: str) -> Iterator[str]:
    """Each size rule ``text`` (the contents of ``path``) breaks, as ``path:line: message``."""
    lines = text.splitlines()
    if len(lines) > MAX_FILE_LINES and not any(
        REASON.match(line) for line in lines[:FILE_REASON_LINES]
    ):
        yield (
            f"{path}:1: {len(lines)} lines (max {MAX_FILE_LINES}): split the file, or give a "
            f"'# size: <reason>' line within its first {FILE_REASON_LINES} lines"
        )
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        n = function_code_lines(node, lines)
        if n > MAX_FUNCTION_LINES and not _has_reason_above(node, lines):
            yield (
                f"{path}:{node.lineno}: function {node.name} has {n} lines of code (max "
                f"{MAX_FUNCTION_LINES}): split it, or give a '# size: <reason>' line right above "
                "its def"
            )


def python_files(paths: Sequence[Path]) -> list[Path]:
    found: set[Path] = set()
    for path in paths:
        found.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(found)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    problems = [
        problem
        for path in python_files([Path(a) for a in args or ["src"]])
        for problem in size_problems(path, path.read_text(encoding="utf-8"))
    ]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Writing what a benchmark measured: progress lines on stderr, markdown tables, and one
benchmark's section of its page under ``docs/results/`` between its markers
(``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``), leaving the other sections alone; for
benchmarks made of named runs, the runs' results kept as JSON so one run can be redone without
the others."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qkv.io import atomic_write, atomic_write_json
from qkv.training.checkpoint import read_json


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def command_block(command: str) -> list[str]:
    """The lines that show the command a section was generated with."""
    return ["Command:", "", "```", command, "```", ""]


def splice(path: Path, section: str, begin: str, end: str) -> None:
    """Replace the text from ``begin`` to ``end`` in ``path`` with ``section`` (which holds both
    markers), or append it; the file is written whole or not at all."""
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmarks\n"
    start, stop = text.find(begin), text.find(end)
    if start >= 0 and stop > start:
        text = text[:start] + section.rstrip("\n") + text[stop + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def write_section(
    section: str, out: Path, begin: str, end: str, *, raw: object, raw_path: Path | None
) -> None:
    """Splice ``section`` into ``out``, dump ``raw`` (the measurements) as JSON to ``raw_path``
    when given, and print the section."""
    splice(out, section, begin, end)
    if raw_path:
        raw_path.write_text(json.dumps(raw, indent=2))
    print(section)


def run_named(
    parser: argparse.ArgumentParser,
    names: Sequence[str],
    known: Sequence[str],
    results_path: Path,
    run: Callable[[str], dict],
    *,
    report_only: bool,
) -> dict:
    """The results of the ``known`` runs, in that order: those kept in ``results_path`` (JSON),
    with each of ``names`` run again by ``run(name)`` first (unless ``report_only``) and saved
    as soon as it finishes. Unknown names are a usage error."""
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(known)}")
    results = read_json(results_path) if results_path.is_file() else {}
    if not report_only:
        for name in names:
            results[name] = run(name)
            atomic_write_json(results_path, results)  # keep each finished run
    return {name: results[name] for name in known if name in results}


def publish(section: str, markdown: Path, title: str, end: str) -> None:
    """Write ``section`` (without its markers), under ``# title``, to ``markdown``."""
    body = section.split("\n", 1)[1].rsplit(end, 1)[0]  # without the markers
    atomic_write(markdown, lambda handle: handle.write(f"# {title}\n\n{body}".encode()))

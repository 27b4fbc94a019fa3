"""Shared by the benchmarks: progress lines on stderr, and writing one benchmark's section of
``docs/benchmarks.md`` between its markers, leaving the other sections alone."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from qkv.io import atomic_write


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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

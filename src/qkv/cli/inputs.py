"""What the text commands share: one reader of input lines (``--file PATH``, ``--file -`` and
piped standard input alike) and one way to show the library's warnings.

Lines are read as bytes and decoded as strict UTF-8 one line at a time, so standard input
streams (a translation is printed as soon as its line is read) and invalid bytes are a
``ValueError`` naming the file (``<stdin>``), the line and the byte offset, whichever way the
bytes came in. The command line turns it into one ``error:`` line and exit code 2.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

STDIN = "-"


def read_lines(source: str | Path) -> Iterator[str]:
    """The lines of the file ``source`` (``"-"``: standard input), without their line ends
    (``\\n`` or ``\\r\\n``), each decoded as strict UTF-8 as it is read.

    Raises:
        ValueError: invalid UTF-8, naming the file, the line and the offset of the first bad
            byte.
        OSError: the file cannot be opened.
    """
    if str(source) == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream put in place of stdin (tests): already decoded
            for line in sys.stdin:
                yield line.rstrip("\r\n")
            return
        yield from _decoded(stream, "<stdin>")
        return
    with open(source, "rb") as handle:
        yield from _decoded(handle, str(source))


def check_stdin_once(sources: list[str], option: str = "--file") -> list[str]:
    """``sources`` if standard input (``-``) is among them at most once: a second read of it
    finds it already consumed (its text would silently be read twice, or come back empty)."""
    count = sum(1 for source in sources if str(source) == STDIN)
    if count > 1:
        raise ValueError(
            f"{option} - is given {count} times, but standard input can be read only once; "
            f"give {option} - once"
        )
    return sources


def _decoded(stream: BinaryIO, name: str) -> Iterator[str]:
    offset = 0  # bytes before the current line
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            bad = raw[error.start : error.end]
            raise ValueError(
                f"{name}: invalid UTF-8 at byte {offset + error.start:,} (line {number}: "
                f"{error.reason}, byte(s) {bad.hex(' ')}); give UTF-8 text"
            ) from None
        offset += len(raw)
        yield text.removesuffix("\n").removesuffix("\r")


@contextmanager
def warnings_to_stderr(command: str) -> Iterator[None]:
    """Show each library warning (an input longer than the model was trained on, cut, or
    mostly unknown) as it happens, as one ``qkv COMMAND: warning: ...`` line on stderr."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"qkv {command}: warning: {message}", file=sys.stderr, flush=True)

    from qkv.tasks.input_checks import InputWarning

    with warnings.catch_warnings():
        # Every warning about the user's input, even a repeat; others (a library's deprecation
        # notice inside a training loop) keep Python's once-per-place rule.
        warnings.simplefilter("always", InputWarning)
        warnings.showwarning = show
        yield

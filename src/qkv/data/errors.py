"""Errors raised by ``qkv.data``.

``DataError`` is a ``ValueError``: bad input (a malformed file, an unknown corpus name, a bad
option) names the file, line or value at fault. ``DatasetUnavailable`` means an optional package
that holds a corpus is not installed; its message gives the exact install command.
"""

from __future__ import annotations


class DataError(ValueError):
    """Bad data or bad data options; the message names the file, line or value at fault."""


class DatasetUnavailable(DataError):
    """A corpus needs a package that is not installed; the message says how to install it."""

"""The stable held-out split that labelled texts, tagged sentences and image data sets share.

:func:`stable_hash` is SHA-1 of a key's UTF-8 bytes, never Python's salted ``hash()``, so a key
lands in the same split on every machine and every run; :func:`split_of` puts about 10% of keys
in valid and 10% in test, and identical keys always in the same split.
"""

from __future__ import annotations

import hashlib

__all__ = ["split_of", "stable_hash"]


def stable_hash(key: str) -> int:
    """A 64-bit hash of ``key`` that is the same in every process (SHA-1 of its UTF-8 bytes)."""
    return int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:8], "big")


def split_of(key: str) -> str:
    """``"valid"`` if ``stable_hash(key) % 10`` is 0, ``"test"`` if it is 1, else ``"train"``."""
    bucket = stable_hash(key) % 10
    return "valid" if bucket == 0 else "test" if bucket == 1 else "train"

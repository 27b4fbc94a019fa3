"""The sizes every decoding entry point takes: a beam size and output lengths.

One check each, called by :func:`~qkv.decoding.beam_search` and
:func:`~qkv.decoding.greedy_search` themselves and by every task that takes a beam before it
loads or runs anything (translation, summaries, dialogue replies, captions, their ``decode:``
sections), so that no entry point caps the beam and another forgets to:

* a size is an ``int``: a ``bool`` (``True`` would be taken as 1) or a ``float`` (``2.5``,
  which torch refuses deep inside with a ``TypeError``) is a ``TypeError`` naming it;
* a beam is between 1 and :data:`MAX_BEAM_SIZE`: a beam of 100,000 allocates its hypotheses
  for half a minute before it runs out of memory, and no model is better for one that wide.
"""

from __future__ import annotations

# The widest beam any entry point takes (every decode section and runner included).
MAX_BEAM_SIZE = 1000

__all__ = ["MAX_BEAM_SIZE", "check_beam_size", "check_int"]


def check_int(value: object, name: str) -> int:
    """``value`` if it is an ``int`` (not a ``bool``), else a ``TypeError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} (a {type(value).__name__})")
    return value


def check_beam_size(value: object, name: str = "beam_size") -> int:
    """``value`` as a beam size: an ``int`` between 1 and :data:`MAX_BEAM_SIZE` (1 is greedy
    search); a ``TypeError`` or ``ValueError`` naming ``name`` and the value otherwise."""
    beam = check_int(value, name)
    if not 1 <= beam <= MAX_BEAM_SIZE:
        raise ValueError(f"{name} must be between 1 and {MAX_BEAM_SIZE}, got {beam} (1: greedy)")
    return beam

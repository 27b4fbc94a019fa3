"""Words for reading comprehension: the one tokenizer of cloze passages, SQuAD contexts and the CLI.

A token (:data:`WORD_PATTERN`, tried in this order at each position) is

- a word: letters, with apostrophes *inside* it (``don't``, ``Lord's``, ``brandish'd``); an
  apostrophe that opens or closes a word is a token of its own, so ``'tis`` is ``'`` ``tis``
  and ``th'`` is ``th`` ``'`` (the Bible writes nested quotations with the same character, and
  a quote must not glue itself to the word it opens);
- a number: digits, with ``.``, ``,`` or ``:`` between digits (``3.14``, ``1,000``, ``3:16``);
- any other character that is not a space, alone (``-``, ``.``, ``"``, ``[``).

Hyphenated words are three tokens (``bed-fellow`` -> ``bed`` ``-`` ``fellow``). Letters are
Unicode letters (``\\w`` without digits and ``_``); ``’`` (U+2019) counts as an apostrophe.
"""

from __future__ import annotations

import re

__all__ = ["WORD_PATTERN", "word_spans", "word_tokens"]

WORD_PATTERN = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,:]\d+)*|\S")
"""A word (inner apostrophes kept), a number, or one other non-space character."""


def word_tokens(text: str) -> list[str]:
    """The tokens of ``text`` (see the module docstring); ``[]`` for blank text."""
    return WORD_PATTERN.findall(text)


def word_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of each token, so ``text[start:end]`` is the token."""
    return [match.span() for match in WORD_PATTERN.finditer(text)]

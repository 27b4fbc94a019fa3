"""What every predict-style entry point checks of its inputs before it does any work.

* **A list is a list.** A bare ``str`` iterates as its characters, so ``translate("Hello")``
  would translate five one-letter texts. :func:`text_list` refuses a ``str`` (or ``bytes``)
  where a list of texts is expected, with a ``TypeError`` that says to pass ``[text]``;
  :func:`one_text` checks the single-text entry points the other way round, and
  :func:`path_list` does for file paths what :func:`text_list` does for texts.
* **Two lengths per model** (:class:`LengthLimits`): the length it was **trained** on, past which
  it still runs but was never taught what to do (longer inputs warn, or are cut or split with a
  warning, as each task allows), and the length it can **take**, its hard limit (longer inputs
  are a ``ValueError`` naming both lengths, raised before the model allocates anything). A model
  with a position table takes what the table holds; a model without one (sinusoidal
  Transformers, RNNs, the captioner's LSTM) represents any length in principle, so it takes
  :data:`HARD_LIMIT_FACTOR` times its trained length: far past it the output means nothing while
  time and memory keep growing (a 2M-word line asked for 4 GB of positional encodings).
* **Cheap counts first.** :func:`refuse_absurd` finds texts that cannot fit from counts made
  without tokenizing (characters, whitespace-separated words), since a tokenizer given a
  2M-word line allocates every token before anyone can count them. A task that cuts long
  texts (classifiers, sentence embeddings) tokenizes only their start (:func:`leading_words`).
* **Unknown input.** :func:`warn_unknown` warns about texts made mostly of tokens the
  vocabulary lacks (a model reading only ``<unk>`` answers the same whatever the text was).
* **Empty input.** :func:`warn_empty` warns about texts that are empty or only whitespace: a
  model that writes from a text (a translation, a summary, a reply) reads only its end marker
  and still writes words made from nothing.

Warnings are :class:`InputWarning` (a ``UserWarning``) raised through :mod:`warnings`; the
command line prints each as one ``qkv COMMAND: warning: ...`` line on stderr.
"""

from __future__ import annotations

import itertools
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# A model without a position table takes at most this many times its trained length.
HARD_LIMIT_FACTOR = 8
# NFKC may compose a few characters into one (Hangul jamo: 3 -> 1), so a text of N characters
# can normalise to N / 3: the cheap character count allows for up to this factor.
NORMALIZATION_SLACK = 4
# Warnings list the first few offending texts, then count the rest.
SHOWN = 5
# What :func:`warn_empty` says happens to an empty text given to a model that writes from it.
NOTHING_READ = (
    "the model reads nothing but the end of its input, and writes words made from nothing"
)
_NON_SPACE = re.compile(r"\S+")

__all__ = [
    "HARD_LIMIT_FACTOR",
    "NOTHING_READ",
    "InputWarning",
    "LengthLimits",
    "check_lengths",
    "leading_words",
    "longest_token",
    "one_text",
    "path_list",
    "refuse_absurd",
    "sentence_list",
    "text_list",
    "warn_empty",
    "warn_long",
    "warn_unknown",
]


class InputWarning(UserWarning):
    """An input the model handles, but not as it handles inputs like its training data (longer
    than it was trained on, cut, split, or mostly unknown tokens)."""


def snippet(text: str, size: int = 30) -> str:
    """The start of ``text`` as a quoted repr, for messages."""
    return repr(text[:size] + "…" if len(text) > size else text)


def _kind(value: object) -> str:
    return type(value).__name__


def check_unicode(
    value: str, what: str, *, hint: str = "", error: type[ValueError] = ValueError
) -> str:
    """``value`` if UTF-8 can encode it. A lone surrogate is not text: Python decodes command-line
    bytes that are not UTF-8 as lone surrogates (``surrogateescape``), and JSON can spell one
    (``"\\ud800"``); a tokenizer would fail on it with a ``TypeError``. ``error`` (a ``ValueError``)
    names where it is, followed by ``hint``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as problem:
        code = ord(value[problem.start])
        raise error(
            f"{what} has a lone surrogate (U+{code:04X} at character {problem.start}), which is "
            f"not text{hint or '; pass valid UTF-8 text (was it written in another encoding?)'}"
        ) from None
    return value


def text_list(texts: Iterable[str], name: str = "texts") -> list[str]:
    """``texts`` as a list of ``str``; a bare ``str``/``bytes`` (which would be read as its
    characters), a non-iterable or a non-``str`` item is a ``TypeError`` naming it."""
    if isinstance(texts, str | bytes):
        raise TypeError(
            f"{name} must be a list of str, got a {_kind(texts)} ({snippet(str(texts))}), which "
            f"would be read as its characters; pass [text] for one text"
        )
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"{name} must be a list of str, got a {_kind(texts)}") from None
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{index}] is a {_kind(item)}, not a str")
        check_unicode(item, f"{name}[{index}]")
    return items


def sentence_list(sentences: Iterable[Sequence[str]], name: str = "sentences") -> list[list[str]]:
    """``sentences`` (each a list of words) as lists; a ``str`` where a list is expected, as
    the whole or as a sentence (whose words would be its characters), is a ``TypeError``."""
    if isinstance(sentences, str | bytes):
        raise TypeError(
            f"{name} must be a list of sentences, each a list of words, got a "
            f"{_kind(sentences)} ({snippet(str(sentences))}); pass [text.split()] for one"
        )
    items = list(sentences)
    for index, words in enumerate(items):
        if isinstance(words, str | bytes):
            raise TypeError(
                f"{name}[{index}] is a {_kind(words)} ({snippet(str(words))}), not a list of "
                "words; pass a list of word lists (or raw texts to tag())"
            )
        text_list(words, f"{name}[{index}]")
    return [list(words) for words in items]


def one_text(text: str, name: str = "text", *, several: str | None = None) -> str:
    """``text`` if it is a ``str``, else a ``TypeError`` naming its type (and ``several``, the
    method that takes a list)."""
    if not isinstance(text, str):
        hint = f"; for several texts use {several}" if several else ""
        raise TypeError(f"{name} must be a str, got a {_kind(text)}{hint}")
    return check_unicode(text, name)


def path_list(paths: Iterable[str | os.PathLike], name: str = "paths") -> list:
    """``paths`` as a list; one bare path (``str``, ``bytes`` or ``Path``) is a ``TypeError``
    that says to pass ``[path]``."""
    if isinstance(paths, str | bytes | os.PathLike):
        raise TypeError(
            f"{name} must be a list of file paths, got a {_kind(paths)} ({snippet(str(paths))}); "
            "pass [path] for one file"
        )
    try:
        return list(paths)
    except TypeError:
        raise TypeError(f"{name} must be a list of file paths, got a {_kind(paths)}") from None


def _label(texts: Sequence[str], index: int, single: bool, item: str = "text") -> str:
    """How messages name ``texts[index]``: ``text #3 ('In the beginning…')``; ``item`` names
    what is checked, and other items than texts and prompts are named whole (``"strip"``:
    ``strip #3 ('scans/a.png')``)."""
    if single:
        return f"the {item}"
    shown = snippet(texts[index]) if item in ("text", "prompt") else repr(texts[index])
    return f"{item} #{index} ({shown})"


@dataclass(frozen=True)
class LengthLimits:
    """The two lengths of a model's inputs, in ``unit``.

    Attributes:
        trained: the longest input of its training data; longer ones warn.
        hard: the longest it can take; longer ones are refused. ``None``: no limit (the task
            cuts or splits long inputs instead).
        unit: what is counted (``"tokens"``, ``"ids"``, ``"tiles"``).
    """

    trained: int
    hard: int | None
    unit: str = "tokens"

    def __post_init__(self) -> None:
        if self.trained < 1 or (self.hard is not None and self.hard < 1):
            raise ValueError(f"length limits must be >= 1, got {self.trained} and {self.hard}")

    @classmethod
    def without_table(cls, trained: int, unit: str = "tokens") -> LengthLimits:
        """The limits of a model with no position table: :data:`HARD_LIMIT_FACTOR` times
        ``trained``."""
        return cls(trained, HARD_LIMIT_FACTOR * trained, unit)

    def describe(self) -> str:
        """``"takes at most H tokens and was trained on up to T"``."""
        return f"takes at most {self.hard:,} {self.unit} and was trained on up to {self.trained:,}"


def _absurd(text: str, limit: int, chars_per_token: int) -> str | None:
    """Why ``text`` must have more than ``limit`` tokens, from counts made without tokenizing
    (``None``: it may fit). Every whitespace-separated word gives at least one token, and no
    token spans more than ``chars_per_token`` characters (after normalisation)."""
    # The count stops after ``limit + 1`` words instead of splitting (copying) the whole text.
    words = itertools.islice(_NON_SPACE.finditer(text), limit + 1)
    if len(text) > limit and sum(1 for _ in words) > limit:
        return f"more than {limit:,} words"
    if len(text) > limit * chars_per_token * NORMALIZATION_SLACK:
        return f"{len(text):,} characters"
    return None


def refuse_absurd(
    texts: Sequence[str],
    limits: LengthLimits,
    *,
    chars_per_token: int,
    advice: str,
    single: bool = False,
    item: str = "text",
) -> None:
    """Raise ``ValueError`` for the first text that cannot fit ``limits.hard`` tokens, judged
    from its characters and words alone (before any tokenizer sees it).

    Args:
        chars_per_token: the most characters one token of the vocabulary spans.
        advice: what to do instead (``"split it into sentences"``).
        single: the caller takes one text (messages say "the text", not "text #i").
        item: what messages call a text (``"prompt"``).
    """
    if limits.hard is None:
        return
    for index, text in enumerate(texts):
        reason = _absurd(text, limits.hard, max(1, chars_per_token))
        if reason is not None:
            raise ValueError(
                f"{_label(texts, index, single, item)} has {reason}, too long for this model, "
                f"which {limits.describe()}: {advice}"
            )


def check_lengths(
    counts: Sequence[int],
    texts: Sequence[str],
    limits: LengthLimits,
    *,
    advice: str,
    consequence: str,
    single: bool = False,
    item: str = "text",
    stacklevel: int = 3,
) -> list[int]:
    """Refuse a text over ``limits.hard`` (``ValueError`` naming its length and both limits),
    then warn once about every text over ``limits.trained``; returns the indices of those.

    Args:
        counts: the length of each text, in ``limits.unit``.
        texts: the texts (or, with ``item``, the names of what is checked, as messages show
            them).
        advice: what to do about a refused text (``"split it into sentences"``).
        consequence: what happens to the long texts (``"they may come out cut short"``).
        stacklevel: of the warning, so that it points at the caller's caller.
    """
    unit = limits.unit
    if limits.hard is not None:
        for index, count in enumerate(counts):
            if count > limits.hard:
                raise ValueError(
                    f"{_label(texts, index, single, item)} has {count:,} {unit}; this model "
                    f"{limits.describe()}: {advice}"
                )
    long = [i for i, count in enumerate(counts) if count > limits.trained]
    warn_long(
        long,
        texts,
        limits.trained,
        unit=unit,
        consequence=consequence,
        counts=counts,
        single=single,
        item=item,
        stacklevel=stacklevel + 1,
    )
    return long


def warn_long(
    long: Sequence[int],
    texts: Sequence[str],
    trained: int,
    *,
    unit: str,
    consequence: str,
    counts: Sequence[int] | None = None,
    single: bool = False,
    item: str = "text",
    stacklevel: int = 3,
) -> None:
    """One :class:`InputWarning` naming the texts at indices ``long`` (with their ``counts``
    when known), longer than the ``trained`` length, and what happens to them."""
    if not long:
        return
    if single and counts is not None:
        head = f"the {item} has {counts[0]:,} {unit}, more than the {trained:,}"
    elif single:
        head = f"the {item} is longer than the {trained:,} {unit}"
    else:
        shown = ", ".join(
            f"{_label(texts, i, False, item)}: {counts[i]:,} {unit}"
            if counts is not None
            else _label(texts, i, False, item)
            for i in long[:SHOWN]
        )
        more = f" and {len(long) - SHOWN} more" if len(long) > SHOWN else ""
        head = f"{len(long)} {item}(s) ({shown}{more}) longer than the {trained:,} {unit}"
    warnings.warn(
        f"{head} this model was trained on: {consequence}", InputWarning, stacklevel=stacklevel
    )


def warn_empty(
    texts: Sequence[str],
    *,
    consequence: str,
    single: bool = False,
    item: str = "text",
    stacklevel: int = 3,
) -> list[int]:
    """Warn once about every text that is empty or only whitespace (the model reads nothing
    but its end marker, and still writes something); returns their indices."""
    empty = [index for index, text in enumerate(texts) if not text.strip()]
    if not empty:
        return []
    if single:
        head = f"the {item} is empty or only whitespace"
    else:
        shown = ", ".join(_label(texts, i, False, item) for i in empty[:SHOWN])
        more = f" and {len(empty) - SHOWN} more" if len(empty) > SHOWN else ""
        head = f"{len(empty)} {item}(s) empty or only whitespace ({shown}{more})"
    warnings.warn(f"{head}: {consequence}", InputWarning, stacklevel=stacklevel)
    return empty


def warn_unknown(
    rows: Sequence[Sequence[int]],
    texts: Sequence[str],
    unknown_id: int | None,
    *,
    consequence: str,
    single: bool = False,
    stacklevel: int = 3,
) -> list[int]:
    """Warn once about every text whose tokens are mostly (more than half) ``unknown_id``;
    returns their indices."""
    if unknown_id is None:
        return []
    found = []
    for index, row in enumerate(rows):
        unknown = sum(1 for token in row if token == unknown_id)
        if row and 2 * unknown > len(row):
            found.append((index, unknown, len(row)))
    if found:
        shown = ", ".join(
            f"{_label(texts, i, single)}: {u} of {n} tokens unknown" for i, u, n in found[:SHOWN]
        )
        more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        warnings.warn(
            f"{len(found)} text(s) made mostly of characters this model's vocabulary lacks "
            f"({shown}{more}): {consequence}",
            InputWarning,
            stacklevel=stacklevel,
        )
    return [index for index, _, _ in found]


def longest_token(tokenizer) -> int:
    """The most characters one token of ``tokenizer`` spans: its longest vocabulary entry (a
    byte-level entry counts bytes, never fewer than the characters it spans); 1 for a character
    vocabulary (a tokenizer without ``pieces``)."""
    pieces = getattr(tokenizer, "pieces", None)
    if pieces is None:
        return 1
    return max(1, *(len(piece) for piece in pieces(range(tokenizer.vocab_size))))


_WORD = re.compile(r"[^ ]+")


def leading_words(text: str, words: int) -> str:
    """The start of ``text`` that holds its first ``words`` space-separated words, cut just
    before the space that follows them; ``text`` itself when it has no more words.

    Tokenizers split at spaces and normalise character by character, so the start gives the
    same first tokens as the whole text: a task that keeps only its first ``N`` tokens may
    tokenize ``leading_words(text, M)`` (``M > N``: every word gives at least one token, which
    the caller checks) instead of a text of millions of words. Only as much of ``text`` as the
    cut needs is scanned.
    """
    if len(text) <= 2 * words:  # more than ``words`` words need at least 2 * words + 1 chars
        return text
    end = 0
    for count, match in enumerate(_WORD.finditer(text)):
        if count == words:
            return text[:end]
        end = match.end()
    return text

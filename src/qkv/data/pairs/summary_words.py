"""Words for summaries and replies, and the extended vocabulary that lets a model copy them.

Tokens (:func:`summary_tokens`) are lower-cased words, numbers and single punctuation marks, as
See et al. 2017 tokenised their articles; identifiers are split into their words, so code and its
summary share a vocabulary (``getSourceLines`` and ``get_source_lines`` are both ``get``
``source`` ``lines``; the underscore is dropped), and :data:`TURN` (the separator of dialogue
turns) is one token.

:class:`SummaryVocab` holds the ``V`` most frequent training words after the four special tokens
of :mod:`qkv.data.tokens.special`; any other word reads as ``<unk>``. For a pointer-generator
(:mod:`qkv.layers.copy`) a source's out-of-vocabulary words get the extended ids ``V``, ``V +
1``, ... in order of first occurrence (:meth:`SummaryVocab.extend`), and a target word that is
one of them gets the same id (:meth:`SummaryVocab.target_ids`): the model can copy it although it
cannot generate it. A target word that is neither in the vocabulary nor in its source is
``<unk>``, for every model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.tokens.special import SPECIAL_TOKENS, UNK_ID
from qkv.io import atomic_write

__all__ = ["TURN", "Extended", "SummaryVocab", "summary_text", "summary_tokens"]

TURN = "<turn>"
"""The token between two turns of a dialogue's context."""

_TOKEN = re.compile(r"<turn>|[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,:]\d+)*|[^\s_]")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[^\W\d_]+")


def summary_tokens(text: str) -> list[str]:
    """The lower-cased tokens of ``text`` (module docstring); ``[]`` for blank text."""
    tokens: list[str] = []
    for token in _TOKEN.findall(text):
        if token[0].isalpha() and not token[1:].islower() and "'" not in token:
            tokens.extend(part.lower() for part in _CAMEL.findall(token))  # camelCase, HTTPServer
        else:
            tokens.append(token.lower())
    return tokens


def summary_text(tokens: Sequence[str]) -> str:
    """Tokens joined by spaces: the text qkv prints and scores (ROUGE and BLEU tokenise it
    again, so the spaces before punctuation change nothing there)."""
    return " ".join(tokens)


@dataclass(frozen=True)
class Extended:
    """A source read for copying: ``ids`` (out-of-vocabulary words as ``<unk>``), ``ext`` (the
    same with each one's extended id ``V + k``) and ``oovs``, its distinct out-of-vocabulary
    words in order of first occurrence (``oovs[k]`` has the id ``V + k``)."""

    ids: list[int]
    ext: list[int]
    oovs: list[str]


class SummaryVocab:
    """Special tokens, then words by falling frequency; ``len(vocab)`` is ``V``."""

    def __init__(self, words: Sequence[str]) -> None:
        if list(words[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise DataError(f"a summary vocabulary starts with {SPECIAL_TOKENS}")
        if len(set(words)) != len(words):
            raise DataError("a summary vocabulary lists each word once")
        self.words = list(words)
        self.index = {word: i for i, word in enumerate(self.words)}

    @classmethod
    def build(cls, texts: Iterable[Sequence[str]], size: int, min_count: int = 1) -> SummaryVocab:
        """The ``size - 4`` most frequent tokens of ``texts`` seen at least ``min_count`` times
        (ties: the token first seen first), after the special tokens."""
        if size <= len(SPECIAL_TOKENS):
            raise DataError(f"vocab_size must be larger than {len(SPECIAL_TOKENS)}, got {size}")
        if min_count < 1:
            raise DataError(f"min_count must be >= 1, got {min_count}")
        counts: Counter[str] = Counter()
        for tokens in texts:
            counts.update(tokens)
        for special in SPECIAL_TOKENS:
            counts.pop(special, None)
        common = [w for w, n in counts.most_common(size - len(SPECIAL_TOKENS)) if n >= min_count]
        return cls([*SPECIAL_TOKENS, *common])

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, tokens: Sequence[str]) -> list[int]:
        """Each token's id, ``<unk>`` outside the vocabulary."""
        return [self.index.get(token, UNK_ID) for token in tokens]

    def extend(self, tokens: Sequence[str]) -> Extended:
        """``tokens`` read for copying (:class:`Extended`)."""
        oovs: dict[str, int] = {}
        ext = []
        for token in tokens:
            if token in self.index:
                ext.append(self.index[token])
            else:
                ext.append(len(self) + oovs.setdefault(token, len(oovs)))
        return Extended(self.ids(tokens), ext, list(oovs))

    def target_ids(self, tokens: Sequence[str], oovs: Sequence[str]) -> list[int]:
        """A target's ids in its source's extended vocabulary: a word of the vocabulary keeps
        its id, one of the source's ``oovs`` gets its extended id, any other is ``<unk>``."""
        extra = {word: len(self) + k for k, word in enumerate(oovs)}
        return [self.index.get(t, extra.get(t, UNK_ID)) for t in tokens]

    def tokens(self, ids: Sequence[int], oovs: Sequence[str] = ()) -> list[str]:
        """The words of ``ids``, extended ids read from ``oovs``; an id outside both is an
        error naming it."""
        out = []
        for i in ids:
            if 0 <= i < len(self):
                out.append(self.words[i])
            elif 0 <= i - len(self) < len(oovs):
                out.append(oovs[i - len(self)])
            else:
                raise DataError(
                    f"id {i} is outside the vocabulary ({len(self)}) and the source's "
                    f"{len(oovs)} out-of-vocabulary words"
                )
        return out

    def save(self, path: str | Path) -> None:
        atomic_write(path, lambda f: json.dump({"words": self.words}, f, ensure_ascii=False),
                     mode="w")  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> SummaryVocab:
        path = Path(path)
        try:
            words = json.loads(path.read_text(encoding="utf-8"))["words"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DataError(f"{path}: not a summary vocabulary ({error})") from error
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise DataError(f"{path}: 'words' must be a list of strings")
        return cls(words)

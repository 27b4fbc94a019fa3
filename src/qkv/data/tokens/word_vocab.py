"""A word vocabulary for readers, with per-example unknown-word slots.

The readers of reading comprehension (Hermann et al. 2015; Kadlec et al. 2016; Chen et al. 2016,
2017) read words, not subwords. Their passages come from held-out books and plays, whose names
a vocabulary trained on other books has mostly never seen; mapped to one ``<unk>``, every unseen
name in a passage would be the same word, and no reader could tell two such candidates apart.
Hermann et al. replaced the entities of each document by ``@entity0``, ``@entity1``, ... for
that reason. Here only the words outside the vocabulary are replaced, the same way: within one
example (passage, question and candidates together), the ``k``-th distinct unknown word becomes
slot ``<unk{order[k]}>``, so the same unseen name is the same id wherever it occurs in the
example and two unseen names are two ids. Training draws ``order`` afresh for every example
and epoch (a permutation of the slots), so no slot means anything by itself; evaluation uses
slots in order of first occurrence. An example with more distinct unknown words than slots
maps the rest to ``<unk>``, and :meth:`WordVocab.encode_example` says how many.

The vocabulary is the words seen at least ``min_count`` times in the training split, so the
rare training words also become slots and the model learns to read slots.

Ids: the four specials of :mod:`qkv.data.tokens.special` (0-3), the cloze placeholder (4), the slots
(5 to 5 + slots - 1), then the words by descending count (ties alphabetical).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.tokens.special import PAD_ID, SPECIAL_TOKENS, UNK_ID

__all__ = ["PLACEHOLDER_ID", "WordVocab"]

PLACEHOLDER = "XXXXX"
PLACEHOLDER_ID = len(SPECIAL_TOKENS)
SLOT_BASE = PLACEHOLDER_ID + 1


class WordVocab:
    """Words to ids (see the module docstring).

    Args:
        words: the vocabulary's words, most frequent first (no specials).
        slots: unknown-word slots per example.
        lowercase: words are lower-cased before lookup (the placeholder is kept).
    """

    def __init__(self, words: Sequence[str], *, slots: int, lowercase: bool) -> None:
        if slots < 0:
            raise DataError(f"unknown-word slots must be >= 0, got {slots}")
        self.slots, self.lowercase = slots, lowercase
        self.tokens = [
            *SPECIAL_TOKENS,
            PLACEHOLDER,
            *(f"<unk{k}>" for k in range(slots)),
            *words,
        ]
        self.index = {token: i for i, token in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise DataError("the vocabulary's words must be distinct and not special tokens")

    @classmethod
    def build(
        cls,
        texts: Iterable[Sequence[str]],
        *,
        min_count: int = 2,
        max_size: int = 50_000,
        slots: int = 64,
        lowercase: bool = True,
    ) -> WordVocab:
        """The words of ``texts`` (token sequences) seen at least ``min_count`` times, the
        ``max_size`` most frequent."""
        if min_count < 1 or max_size < 1:
            raise DataError(f"min_count and max_size must be >= 1, got {min_count}, {max_size}")
        counts: Counter[str] = Counter()
        for tokens in texts:
            counts.update(tokens)
        if lowercase:
            merged: Counter[str] = Counter()
            for word, n in counts.items():
                merged[word if word == PLACEHOLDER else word.lower()] += n
            counts = merged
        reserved = set(SPECIAL_TOKENS) | {PLACEHOLDER}
        kept = sorted(
            (w for w, n in counts.items() if n >= min_count and w not in reserved),
            key=lambda w: (-counts[w], w),
        )[:max_size]
        return cls(kept, slots=slots, lowercase=lowercase)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def key(self, word: str) -> str:
        """The form of ``word`` that is looked up."""
        return word.lower() if self.lowercase and word != PLACEHOLDER else word

    def encode_example(
        self,
        sequences: Sequence[Sequence[str]],
        order: Sequence[int] | None = None,
        hide: Collection[str] = (),
    ) -> tuple[list[list[int]], int]:
        """The ids of each token sequence of one example, its unknown words sharing slots
        (the ``k``-th distinct one gets slot ``order[k]``; default ``k``), and how many distinct
        unknown words got ``<unk>`` for want of a slot. The words of ``hide`` (looked-up forms,
        :meth:`key`) are read as unknown words too: Hermann et al.'s anonymised entities."""
        assigned: dict[str, int] = {}
        overflow: set[str] = set()
        out = []
        for tokens in sequences:
            ids = []
            for word in tokens:
                key = self.key(word)
                found = None if key in hide else self.index.get(key)
                if found is None or SLOT_BASE <= found < SLOT_BASE + self.slots:
                    k = assigned.setdefault(key, len(assigned))
                    if k < self.slots:
                        found = SLOT_BASE + (k if order is None else int(order[k]))
                    else:
                        found = UNK_ID
                        overflow.add(key)
                ids.append(found)
            out.append(ids)
        return out, len(overflow)

    def token(self, index: int) -> str:
        return self.tokens[index]

    def to_json(self) -> str:
        words = self.tokens[SLOT_BASE + self.slots :]
        return json.dumps({"slots": self.slots, "lowercase": self.lowercase, "words": words})

    def save(self, path: str | Path) -> None:
        from qkv.io import atomic_write

        atomic_write(Path(path), lambda handle: handle.write(self.to_json()), mode="w")

    @classmethod
    def load(cls, path: str | Path) -> WordVocab:
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(raw["words"], slots=int(raw["slots"]), lowercase=bool(raw["lowercase"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DataError(f"{path} is not a word vocabulary written by qkv: {error}") from None

"""A character vocabulary for character-level language models (Karpathy's char-rnn setting).

Each distinct character of the training text gets an id after the four special tokens (ids
0-3, as in every qkv vocabulary); characters never seen in training encode to ``<unk>``. The
vocabulary is saved as JSON beside the model and loaded back with the same ids.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.tokens.special import SPECIAL_TOKENS, UNK_ID
from qkv.io import atomic_write

FORMAT = "qkv-char-vocabulary"


class CharTokenizer:
    """Characters to ids and back; ``chars[i]`` has id ``4 + i``."""

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = list(chars)
        if any(not isinstance(c, str) or len(c) != 1 for c in self.chars):
            raise DataError("a character vocabulary holds single characters only")
        if len(set(self.chars)) != len(self.chars):
            raise DataError("a character vocabulary lists each character once")
        offset = len(SPECIAL_TOKENS)
        self._ids = {c: offset + i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, text: str, *, min_count: int = 1) -> CharTokenizer:
        """Every character occurring at least ``min_count`` times in ``text``, in code point
        order (so the ids do not depend on the text's order)."""
        counts = Counter(text)
        chars = sorted(c for c, n in counts.items() if n >= min_count)
        if not chars:
            raise ValueError("cannot build a character vocabulary from empty text")
        return cls(chars)

    @property
    def vocab_size(self) -> int:
        return len(SPECIAL_TOKENS) + len(self.chars)

    def encode(self, text: str) -> list[int]:
        """One id per character; characters outside the vocabulary become ``UNK_ID``."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        ids = self._ids
        return [ids.get(c, UNK_ID) for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        """The characters of ``ids``; special ids (``<unk>`` included) are skipped."""
        offset, size = len(SPECIAL_TOKENS), self.vocab_size
        out = []
        for position, value in enumerate(int(i) for i in ids):
            if not 0 <= value < size:
                raise ValueError(
                    f"id {value} at position {position} is outside the vocabulary [0, {size})"
                )
            if value >= offset:
                out.append(self.chars[value - offset])
        return "".join(out)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        payload = json.dumps({"format": FORMAT, "chars": self.chars}, ensure_ascii=False)
        atomic_write(path, lambda handle: handle.write(payload.encode("utf-8")))
        return path

    @classmethod
    def load(cls, path: str | Path) -> CharTokenizer:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON
            raise DataError(f"{path} is not a readable character vocabulary: {error}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataError(f"{path} is not a qkv character vocabulary")
        chars = data.get("chars")
        if not isinstance(chars, list) or not all(isinstance(c, str) for c in chars):
            raise DataError(f"{path}: 'chars' must be a list of characters, got {chars!r:.60}")
        try:
            return cls(chars)
        except DataError as error:
            raise DataError(f"{path}: {error}") from None

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def is_char_vocabulary(path: str | Path) -> bool:
    """Whether ``path`` holds a :class:`CharTokenizer` (rather than a ``tokenizers`` file)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: not a character vocabulary
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT

"""The ``data:`` section of a language-model run: the text corpus, its tokenizer and blocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import choice, ranged
from qkv.tasks.sections import check_vocab_size

# char, or bpe (byte-level, trained with `tokenizers`)
LM_TOKENIZERS = ("char", "bpe")


@dataclass(frozen=True)
class LMDataConfig:
    """A language model's data: a text corpus, its vocabulary and the context length."""

    corpus: str = "shakespeare"  # shakespeare, kjv, or text (options: {path: FILE_OR_FOLDER})
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = choice("char", LM_TOKENIZERS)
    vocab_size: int = 8000  # bpe only
    block_size: int = ranged(256, ">= 2")  # tokens of context per training sequence
    # evaluated during training (None: the whole split)
    valid_tokens: int | None = ranged(200_000, "null or >= block_size")

    def __post_init__(self) -> None:
        if self.tokenizer not in LM_TOKENIZERS:
            raise ValueError(f"data.tokenizer must be char or bpe, got {self.tokenizer!r}")
        if self.tokenizer == "bpe":
            check_vocab_size(self.vocab_size, 260, " for byte-level BPE")
        if self.block_size < 2:
            raise ValueError(f"data.block_size must be >= 2, got {self.block_size}")
        if self.valid_tokens is not None and self.valid_tokens < self.block_size:
            raise ValueError(
                f"data.valid_tokens must be >= data.block_size={self.block_size}, got "
                f"{self.valid_tokens}"
            )

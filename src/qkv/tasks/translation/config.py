"""The sections of a translation run: ``data:`` (the parallel corpus, its BPE vocabulary) and
``decode:`` (beam search)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import ranged
from qkv.decoding.sizes import MAX_BEAM_SIZE, check_beam_size, check_int
from qkv.tasks.sections import check_vocab_size


@dataclass(frozen=True)
class DataConfig:
    corpus: str = "bible"
    options: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = 8000
    shared_vocab: bool = True
    max_len: int = ranged(128, ">= 2")  # subword tokens per side; longer pairs are dropped
    # greedy-decoded during training to pick the best model
    valid_bleu_sentences: int = ranged(200, ">= 0")

    def __post_init__(self) -> None:
        check_vocab_size(self.vocab_size, 16)
        if self.max_len < 2:
            raise ValueError(f"data.max_len must be >= 2, got {self.max_len}")
        if self.valid_bleu_sentences < 0:
            raise ValueError(
                f"data.valid_bleu_sentences must be >= 0, got {self.valid_bleu_sentences}"
            )


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = ranged(4, f"[1, {MAX_BEAM_SIZE}]")
    length_penalty: float = ranged(0.6, ">= 0")
    max_len_a: float = ranged(1.5, "> 0")  # max output length = a * source length + b
    max_len_b: int = ranged(10, ">= 0")
    batch_size: int = ranged(32, ">= 1")
    # Beam search stops a sentence once ceil(patience * beam_size) hypotheses have finished
    # (qkv.decoding.beam; 1.0 is CTranslate2's rule); None: the exact search.
    patience: float | None = ranged(None, "null or > 0")

    def __post_init__(self) -> None:
        if self.patience is not None and (
            isinstance(self.patience, bool)
            or not isinstance(self.patience, int | float)
            or not (math.isfinite(self.patience) and self.patience > 0)
        ):
            raise ValueError(f"decode.patience must be a number > 0 or null, got {self.patience!r}")
        check_beam_size(self.beam_size, "decode.beam_size")
        if self.length_penalty < 0:
            raise ValueError(f"decode.length_penalty must be >= 0, got {self.length_penalty}")
        if self.max_len_a <= 0 or self.max_len_b < 0 or self.batch_size < 1:
            raise ValueError(
                f"decode needs max_len_a > 0, max_len_b >= 0, batch_size >= 1; got "
                f"{self.max_len_a}, {self.max_len_b}, {self.batch_size}"
            )

    def max_len(self, source_len: int) -> int:
        return int(self.max_len_a * source_len + self.max_len_b)

    def sizes(self, beam_size: int | None, batch_size: int | None) -> tuple[int, int]:
        """The beam and batch sizes a call asked for, else these defaults; out of range is a
        ``ValueError`` naming the value."""
        beam_size = self.beam_size if beam_size is None else beam_size
        batch_size = self.batch_size if batch_size is None else batch_size
        check_beam_size(beam_size)
        if check_int(batch_size, "batch_size") < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return beam_size, batch_size

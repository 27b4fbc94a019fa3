"""Sections more than one task reads: the ``data:`` section of the encoder tasks (classification,
tagging, named entities) and of the taggers (tagging, named entities), the ``decode:`` section
of tasks that predict without search, and the vocabulary size check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import choice, note_range, ranged
from qkv.data.labelled.word_split import SPLITTERS, check_splitter, corpus_splitter
from qkv.data.tokens.subword import MAX_VOCAB_SIZE
from qkv.decoding.sizes import MAX_BEAM_SIZE

__all__ = [
    "ENCODER_TOKENIZERS",
    "MAX_BEAM_SIZE",
    "EncoderDataConfig",
    "PredictConfig",
    "check_vocab_size",
]

# What an encoder task's text is tokenized with.
ENCODER_TOKENIZERS = ("bpe", "pretrained")


def check_vocab_size(value: int, smallest: int, what: str = "") -> None:
    """``data.vocab_size`` between ``smallest`` and :data:`MAX_VOCAB_SIZE` (the tokenizers
    library aborts the process, with no error to catch, on a vocabulary it cannot allocate)."""
    note_range("vocab_size", f"integer from {smallest} to {MAX_VOCAB_SIZE:,}")
    if not smallest <= value <= MAX_VOCAB_SIZE:
        raise ValueError(
            f"data.vocab_size must be between {smallest} and {MAX_VOCAB_SIZE:,}{what}, got {value}"
        )


@dataclass(frozen=True)
class EncoderDataConfig:
    """An encoder task's data: a labelled corpus and its vocabulary.

    ``tokenizer``: ``bpe`` (trained on the training text, ``vocab_size`` ids) or ``pretrained``
    (the vocabulary of ``model.pretrained``, which a fine-tuned model must use); ``max_len``: the
    most ids per input, specials included (longer texts are cut; long sentences to tag are
    split into windows of whole words)."""

    corpus: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = choice("bpe", ENCODER_TOKENIZERS)
    vocab_size: int = 8000
    max_len: int = ranged(128, ">= 3")

    def __post_init__(self) -> None:
        if self.tokenizer not in ENCODER_TOKENIZERS:
            raise ValueError(f"data.tokenizer must be bpe or pretrained, got {self.tokenizer!r}")
        check_vocab_size(self.vocab_size, 16)
        if self.max_len < 3:
            raise ValueError(f"data.max_len must be >= 3, got {self.max_len}")


@dataclass(frozen=True)
class TaggerDataConfig(EncoderDataConfig):
    """A tagger's data: an :class:`EncoderDataConfig` and ``splitter``, how raw text to tag is
    split into words (:mod:`qkv.data.labelled.word_split`: ``plain`` or ``tweets``). Left out,
    it is the corpus's own scheme (``tweets`` for ``wnut16``, else ``plain``), filled in here,
    so the saved ``config.json`` of a new run names it and a run saved before the key existed
    loads with its corpus's scheme."""

    splitter: str = choice("", SPLITTERS)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.splitter == "":
            object.__setattr__(self, "splitter", corpus_splitter(self.corpus))
        check_splitter(self.splitter)


@dataclass(frozen=True)
class PredictConfig:
    """How a classifier or tagger is run on many inputs."""

    batch_size: int = ranged(64, ">= 1")

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"decode.batch_size must be >= 1, got {self.batch_size}")

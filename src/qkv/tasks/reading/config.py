"""The ``data:`` section of a reading run and the reader families: which corpora, tokenizers and
windows a reader may read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import choice, ranged
from qkv.tasks.sections import check_vocab_size

CLOZE_FAMILY = "cloze_reader"


SPAN_FAMILY = "span_reader"


ENCODER_SPAN_FAMILY = "encoder_span_reader"


INPUT_KINDS = {CLOZE_FAMILY: "words", SPAN_FAMILY: "words", ENCODER_SPAN_FAMILY: "subwords"}


TOKENIZERS = {"words": ("words",), "subwords": ("bpe", "pretrained")}


# Every tokenizer a reader may take.
TOKENIZER_NAMES = tuple(t for kinds in TOKENIZERS.values() for t in kinds)


SPAN_CORPORA = ("cloze", "synthetic", "squad")


@dataclass(frozen=True)
class ReadingDataConfig:
    """A reader's data and vocabulary.

    ``corpus``: ``cloze`` (options ``kind: entities|nouns``, ``sources: [bible, shakespeare]``,
    ``translation``, ``stride``, ``train_translations``, ``train_blanks``), ``synthetic``
    (options ``n``, ``seed``) or, for span readers, ``squad`` (options ``train``, ``test``,
    ``valid``: SQuAD v1.1 files).
    ``tokenizer``: ``words`` (the word readers: a vocabulary of the training split's words),
    ``bpe`` (a BPE of ``vocab_size`` ids trained on the training text) or ``pretrained`` (the
    vocabulary of ``model.pretrained``); the encoder span reader takes the last two, with
    ``max_len`` ids per window (specials and the question included) and ``window_overlap``
    subwords shared by neighbouring windows (:mod:`qkv.tasks.reading.subwords`).
    ``min_count``/``max_vocab``: the word vocabulary (training words seen that often, the most
    frequent first); ``unknown_slots``: ids for one example's distinct unknown words;
    ``valid_questions``: how many validation questions pick the best weights during training
    (``None``: all); ``anonymize``: a cloze question's candidate words are read as unknown words,
    so each is a slot that means nothing outside its example (Hermann et al. 2015 anonymised
    the entities of CNN/Daily Mail so that a reader cannot answer from what it knows of a
    name, only from the passage)."""

    corpus: str = choice("cloze", SPAN_CORPORA)
    options: dict[str, Any] = field(default_factory=dict)
    lowercase: bool = True
    min_count: int = ranged(2, ">= 1")
    max_vocab: int = ranged(50_000, ">= 1")
    unknown_slots: int = ranged(64, ">= 0")
    valid_questions: int | None = ranged(2000, "null or >= 1")
    anonymize: bool = False
    tokenizer: str = choice("words", TOKENIZER_NAMES)
    vocab_size: int = 8000
    max_len: int = ranged(384, ">= 8")
    window_overlap: int = 64

    def __post_init__(self) -> None:
        if self.corpus not in SPAN_CORPORA:
            raise ValueError(
                f"data.corpus must be one of {', '.join(SPAN_CORPORA)}, got {self.corpus!r}"
            )
        for name in ("min_count", "max_vocab"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if self.tokenizer not in TOKENIZER_NAMES:
            raise ValueError(
                f"data.tokenizer must be one of {', '.join(TOKENIZER_NAMES)}, got "
                f"{self.tokenizer!r}"
            )
        check_vocab_size(self.vocab_size, 16)
        if self.max_len < 8:
            raise ValueError(f"data.max_len must be >= 8, got {self.max_len}")
        if not 0 <= self.window_overlap <= self.max_len // 4:
            raise ValueError(
                f"data.window_overlap must lie in [0, max_len // 4 = {self.max_len // 4}], got "
                f"{self.window_overlap}"
            )
        if self.unknown_slots < 0:
            raise ValueError(f"data.unknown_slots must be >= 0, got {self.unknown_slots}")
        if self.valid_questions is not None and self.valid_questions < 1:
            raise ValueError(
                f"data.valid_questions must be >= 1 or null, got {self.valid_questions}"
            )

"""The sections of a summarisation or dialogue run: ``data:`` (text pairs and the word
vocabulary), ``train:`` (the engine's settings and the coverage loss's weight) and ``decode:``
(beam search with the constraints summaries need)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from qkv.config_values import ranged
from qkv.decoding.sizes import MAX_BEAM_SIZE, check_beam_size
from qkv.training.config import TrainConfig


def _check_run_dir(name: str, value: object) -> None:
    """``value`` names a run directory (a non-blank string) or is ``None``."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{name} must be a trained run's directory or null, got {value!r}")


@dataclass(frozen=True)
class SummaryDataConfig:
    """The ``data:`` section: a corpus of ``(source, target)`` pairs (any corpus of
    :mod:`qkv.data.pairs.registry`: ``docstrings``, ``aclsum``, ``plays-dialogue``, ``tsv``,
    ``files``) and the word vocabulary.

    Attributes:
        vocab_size: ``V``, special tokens included: the most frequent training words (sources
            and targets, one shared vocabulary so that a copied word has one id).
        min_count: a word needs this many training occurrences to enter the vocabulary.
        max_source_len: training sources are cut to this many tokens (See et al. cut their
            articles to 400); a longer input to summarise is read whole, with a warning.
        max_target_len: training pairs with a longer target are dropped.
        valid_examples: validation pairs decoded (greedily) at each evaluation to pick the best
            weights by ROUGE-L; ``0``: pick by validation loss.
        vocab_from: a trained run's directory whose vocabulary this run reads instead of
            building its own (``vocab_size`` and ``min_count`` then play no part), so that runs
            on different data options score the same words: the model of the replies alone
            (empty sources) builds a smaller vocabulary than the model with contexts, and a
            perplexity over fewer words, more of them ``<unk>``, is not comparable.
    """

    corpus: str = "docstrings"
    options: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = ranged(20_000, ">= 16")
    min_count: int = ranged(2, ">= 1")
    max_source_len: int = ranged(400, ">= 1")
    max_target_len: int = ranged(60, ">= 1")
    valid_examples: int = ranged(200, ">= 0")
    vocab_from: str | None = None

    def __post_init__(self) -> None:
        _check_run_dir("data.vocab_from", self.vocab_from)
        for name in ("vocab_size", "min_count", "max_source_len", "max_target_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"data.{name} must be a positive int, got {value!r}")
        if self.vocab_size < 16:
            raise ValueError(f"data.vocab_size must be >= 16, got {self.vocab_size}")
        if self.valid_examples < 0:
            raise ValueError(f"data.valid_examples must be >= 0, got {self.valid_examples}")


@dataclass(frozen=True)
class SummaryTrainConfig(TrainConfig):
    """The ``train:`` section: the engine's settings, ``coverage_weight``, the ``lambda`` of
    See et al.'s coverage loss (eq. 13; read by models with ``coverage: true``), and
    ``init_from``: a trained run's directory whose best weights and vocabulary this run starts
    from (See et al.'s final coverage phase; :mod:`qkv.tasks.init_from`). Its steps and schedule
    start at zero; the model may add only zero-initialised parameters (``coverage_weight``)."""

    coverage_weight: float = ranged(1.0, ">= 0")
    init_from: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_run_dir("train.init_from", self.init_from)
        value = self.coverage_weight
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"train.coverage_weight must be a number >= 0, got {value!r}")


@dataclass(frozen=True)
class SummaryDecodeConfig:
    """The ``decode:`` section: beam search with the constraints summaries need.

    Attributes:
        beam_size: ``1`` is greedy search.
        length_penalty: ``alpha`` of the GNMT penalty.
        min_len, max_len: fewest and most output tokens (``</s>`` not counted).
        no_repeat_ngram: ``n > 0``: no output holds an ``n``-gram twice (``3``: Paulus et
            al.'s trigram block); ``0`` blocks nothing.
        batch_size: inputs decoded together.
    """

    beam_size: int = ranged(4, f"[1, {MAX_BEAM_SIZE}]")
    length_penalty: float = ranged(1.0, ">= 0")
    min_len: int = ranged(0, ">= 0")
    max_len: int = ranged(60, ">= 1")
    no_repeat_ngram: int = ranged(0, ">= 0")
    batch_size: int = ranged(32, ">= 1")

    def __post_init__(self) -> None:
        check_beam_size(self.beam_size, "decode.beam_size")
        if not math.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"decode.length_penalty must be >= 0, got {self.length_penalty}")
        if not 0 <= self.min_len <= self.max_len or self.max_len < 1:
            raise ValueError(
                f"decode needs 0 <= min_len <= max_len and max_len >= 1, got min_len="
                f"{self.min_len}, max_len={self.max_len}"
            )
        if self.no_repeat_ngram < 0 or self.batch_size < 1:
            raise ValueError(
                f"decode needs no_repeat_ngram >= 0 and batch_size >= 1, got "
                f"{self.no_repeat_ngram} and {self.batch_size}"
            )

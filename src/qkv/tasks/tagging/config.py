"""The ``data:`` section of a tagging run (part-of-speech tagged sentences)."""

from __future__ import annotations

from dataclasses import dataclass

from qkv.tasks.sections import TaggerDataConfig


@dataclass(frozen=True)
class TaggingDataConfig(TaggerDataConfig):
    corpus: str = "pos"  # pos (OANC train, WSJ gold test), or file (options: {train: ...})

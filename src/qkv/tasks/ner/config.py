"""The ``data:`` section of a named-entity run (entity-tagged sentences)."""

from __future__ import annotations

from dataclasses import dataclass

from qkv.tasks.sections import TaggerDataConfig


@dataclass(frozen=True)
class EntityDataConfig(TaggerDataConfig):
    corpus: str = "wnut16"  # wnut16, or file (options: {train: ..., scheme: iobes, ...})

"""The dialogue task: its spec. It trains and runs with the summarisation task's machinery
(:func:`~qkv.tasks.dialogue.train.train_replier`,
:class:`~qkv.tasks.summarisation.runner.Replier`)."""

from __future__ import annotations

from qkv.tasks.summarisation.task import text_to_text_spec

TASK = text_to_text_spec(
    "dialogue",
    "dialogue model",
    trainer="qkv.tasks.dialogue.train:train_replier",
    runner="qkv.tasks.summarisation.runner:Replier",
)

"""The summarisation task: its spec. Training is in :mod:`~qkv.tasks.summarisation.train`, the
runner (:class:`~qkv.tasks.summarisation.runner.Summariser`) in
:mod:`~qkv.tasks.summarisation.runner`; the dialogue task shares both."""

from __future__ import annotations

from typing import Any

from qkv.tasks.spec import TaskSpec
from qkv.tasks.summarisation.config import (
    SummaryDataConfig,
    SummaryDecodeConfig,
    SummaryTrainConfig,
)

FAMILIES = ("seq2seq_rnn", "transformer")


def text_to_text_spec(name: str, label: str, trainer: str, runner: str, **fields: Any) -> TaskSpec:
    """The :class:`TaskSpec` of a text-to-text task (summarisation or dialogue): both read the
    same sections, train the same families and take the same options."""
    return TaskSpec(
        name=name,
        label=label,
        input="text",
        families=FAMILIES,
        sections={
            "data": SummaryDataConfig,
            "train": SummaryTrainConfig,
            "decode": SummaryDecodeConfig,
        },
        trainer=trainer,
        runner=runner,
        evaluate_options=frozenset({"beam", "examples", "batch_size"}),
        view_options=frozenset({"beam"}),
        train_settings=frozenset({"batch_tokens"}),
        **fields,
    )


TASK = text_to_text_spec(
    "summarisation",
    "summariser",
    trainer="qkv.tasks.summarisation.train:train_summariser",
    runner="qkv.tasks.summarisation.runner:Summariser",
)

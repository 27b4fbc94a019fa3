"""Dialogue: the reply to the previous turns of a conversation, with the machinery of
:mod:`qkv.tasks.summarisation` (the same models, vocabulary, loss and beam search; the
previous turns joined by ``<turn>`` are the source). Data: :mod:`qkv.data.dialogue` (the
speeches of the plays, split by play) or a user's TSV of ``context<TAB>reply`` lines.
"""

from __future__ import annotations

from qkv.tasks.protocol import TaskSpec
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_skeleton import Trained
from qkv.tasks.summarisation import FAMILIES, train_text_to_text
from qkv.tasks.summariser import Replier
from qkv.tasks.summary_inputs import SummaryDataConfig, SummaryDecodeConfig, SummaryTrainConfig

__all__ = ["train_replier"]


def train_replier(config: RunConfig, **options) -> Trained:
    """:func:`~qkv.tasks.summarisation.train_text_to_text` for a
    :class:`~qkv.tasks.summariser.Replier`."""
    return train_text_to_text(config, Replier, **options)


TASK = TaskSpec(
    name="dialogue",
    label="dialogue model",
    input="text",
    families=FAMILIES,
    sections={
        "data": SummaryDataConfig,
        "train": SummaryTrainConfig,
        "decode": SummaryDecodeConfig,
    },
    train=train_replier,
    load=Replier.load,
    evaluate_options=frozenset({"beam", "examples", "batch_size"}),
    view_options=frozenset({"beam"}),
    train_settings=frozenset({"batch_tokens"}),
)

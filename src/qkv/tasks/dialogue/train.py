"""Dialogue: the reply to the previous turns of a conversation, with the machinery of
:mod:`qkv.tasks.summarisation.task` (the same models, vocabulary, loss and beam search; the
previous turns joined by ``<turn>`` are the source). Data: :mod:`qkv.data.pairs.dialogue` (the
speeches of the plays, split by play) or a user's TSV of ``context<TAB>reply`` lines.
"""

from __future__ import annotations

from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.summarisation.runner import Replier
from qkv.tasks.summarisation.train import train_text_to_text


def train_replier(run: TrainingRun) -> Trained:
    """:func:`~qkv.tasks.summarisation.train.train_text_to_text` for a
    :class:`~qkv.tasks.summarisation.runner.Replier`."""
    return train_text_to_text(run, Replier)

"""The translation task: its spec. Training is in :mod:`~qkv.tasks.translation.train`, the
runner (:class:`~qkv.tasks.translation.runner.Translator`) in :mod:`~qkv.tasks.translation.runner`,
the sections in :mod:`~qkv.tasks.translation.config`."""

from __future__ import annotations

from qkv.tasks.spec import TaskSpec
from qkv.tasks.translation.config import DataConfig, DecodeConfig
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="translation",
    label="translation model",
    input="text",
    families=("seq2seq_rnn", "transformer"),
    sections={"data": DataConfig, "train": TrainConfig, "decode": DecodeConfig},
    trainer="qkv.tasks.translation.train:train_translation",
    runner="qkv.tasks.translation.runner:Translator",
    evaluate_options=frozenset({"beam", "examples", "batch_size"}),
    view_options=frozenset({"beam", "layer", "heads"}),
    exporter="qkv.ctranslate2.export:export_translation",
    precisions=True,
)

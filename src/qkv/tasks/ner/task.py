"""The named-entity task: its spec. Training is in :mod:`~qkv.tasks.ner.train`, the runner
(:class:`~qkv.tasks.ner.runner.EntityTagger`) in :mod:`~qkv.tasks.ner.runner`."""

from __future__ import annotations

from qkv.tasks.ner.config import EntityDataConfig
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="ner",
    label="entity tagger",
    input="text",
    families=("sequence_tagger",),
    sections={"data": EntityDataConfig, "train": TrainConfig, "decode": PredictConfig},
    trainer="qkv.tasks.ner.train:train_entity_tagger",
    runner="qkv.tasks.ner.runner:EntityTagger",
    model_keys=frozenset({"preset", "pretrained"}),
    view_options=frozenset({"layer", "heads"}),
)

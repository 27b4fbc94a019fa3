"""The tagging task (parts of speech): its spec. Training is in :mod:`~qkv.tasks.tagging.train`,
the runner (:class:`~qkv.tasks.tagging.runner.Tagger`) in :mod:`~qkv.tasks.tagging.runner`."""

from __future__ import annotations

from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec
from qkv.tasks.tagging.config import TaggingDataConfig
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="tagging",
    label="tagger",
    input="text",
    families=("sequence_tagger",),
    sections={"data": TaggingDataConfig, "train": TrainConfig, "decode": PredictConfig},
    trainer="qkv.tasks.tagging.train:train_tagger",
    runner="qkv.tasks.tagging.runner:Tagger",
    model_keys=frozenset({"preset", "pretrained"}),
    view_options=frozenset({"layer", "heads"}),
)

"""The classification task: its spec. Training is in :mod:`~qkv.tasks.classification.train`, the
runner (:class:`~qkv.tasks.classification.runner.Classifier`) in
:mod:`~qkv.tasks.classification.runner`."""

from __future__ import annotations

from qkv.tasks.classification.config import ClassificationDataConfig, ClassificationTrainConfig
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec

TASK = TaskSpec(
    name="classification",
    label="text classifier",
    input="text",
    families=("encoder_classifier",),
    sections={
        "data": ClassificationDataConfig,
        "train": ClassificationTrainConfig,
        "decode": PredictConfig,
    },
    trainer="qkv.tasks.classification.train:train_classifier",
    runner="qkv.tasks.classification.runner:Classifier",
    model_keys=frozenset({"preset", "pretrained"}),
    view_options=frozenset({"layer", "heads", "pooling"}),
    train_settings=frozenset({"batch_tokens"}),
    moved_model_keys={"penalty_weight": "train.penalty_weight"},
)

"""The image classification task (the Vision Transformer): its spec. Training is in
:mod:`~qkv.tasks.image_classification.train`, the runner in
:mod:`~qkv.tasks.image_classification.runner`."""

from __future__ import annotations

from qkv.tasks.image_classification.config import ImageDataConfig
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="image_classification",
    label="Vision Transformer",
    input="image",
    families=("vit",),
    sections={"data": ImageDataConfig, "train": TrainConfig, "decode": PredictConfig},
    trainer="qkv.tasks.image_classification.train:train_image_classifier",
    runner="qkv.tasks.image_classification.runner:ImageClassifier",
    model_keys=frozenset({"preset"}),
    view_options=frozenset({"layer", "heads"}),
    train_settings=frozenset({"label_smoothing"}),
)

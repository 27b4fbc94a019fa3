"""The captioning task (Show, Attend and Tell): its spec. Training is in
:mod:`~qkv.tasks.captioning.train`, the runner in :mod:`~qkv.tasks.captioning.runner`."""

from __future__ import annotations

from qkv.tasks.captioning.config import OBJECTIVE_WEIGHTS, CaptionDataConfig, CaptionTrainConfig
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec

TASK = TaskSpec(
    name="captioning",
    label="captioner",
    input="image",
    families=("show_attend_tell",),
    sections={"data": CaptionDataConfig, "train": CaptionTrainConfig, "decode": PredictConfig},
    trainer="qkv.tasks.captioning.train:train_captioner",
    runner="qkv.tasks.captioning.runner:Captioner",
    model_keys=frozenset({"preset"}),
    evaluate_options=frozenset({"beam"}),
    view_options=frozenset({"beam"}),
    splits=("valid", "test"),
    train_settings=frozenset({"label_smoothing"}),
    moved_model_keys={name: f"train.{name}" for name in OBJECTIVE_WEIGHTS},
)

"""The reading comprehension task: its spec. Training is in :mod:`~qkv.tasks.reading.train`, the
runner (:class:`~qkv.tasks.reading.runner.Reader`) in :mod:`~qkv.tasks.reading.runner`."""

from __future__ import annotations

from qkv.tasks.reading.config import (
    CLOZE_FAMILY,
    ENCODER_SPAN_FAMILY,
    SPAN_FAMILY,
    ReadingDataConfig,
)
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import TaskSpec
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="reading",
    label="reader",
    input="text",
    families=(CLOZE_FAMILY, SPAN_FAMILY, ENCODER_SPAN_FAMILY),
    sections={"data": ReadingDataConfig, "train": TrainConfig, "decode": PredictConfig},
    trainer="qkv.tasks.reading.train:train_reader",
    runner="qkv.tasks.reading.runner:Reader",
    model_keys=frozenset({"preset", "pretrained"}),
    train_settings=frozenset({"batch_tokens"}),
)

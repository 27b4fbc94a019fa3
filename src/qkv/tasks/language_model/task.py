"""The language-model task: its spec. Training is in :mod:`~qkv.tasks.language_model.train`,
the runner (:class:`~qkv.tasks.language_model.runner.LanguageModel`) in
:mod:`~qkv.tasks.language_model.runner`."""

from __future__ import annotations

from qkv.decoding.sampling import SamplingConfig
from qkv.tasks.language_model.config import LMDataConfig
from qkv.tasks.spec import TaskSpec
from qkv.training.config import TrainConfig

TASK = TaskSpec(
    name="language_model",
    label="language model",
    input="text",
    families=("transformer_lm",),
    sections={"data": LMDataConfig, "train": TrainConfig, "decode": SamplingConfig},
    trainer="qkv.tasks.language_model.train:train_language_model",
    runner="qkv.tasks.language_model.runner:LanguageModel",
    model_keys=frozenset({"preset"}),
    view_options=frozenset({"layer", "heads"}),
    generates=True,
    train_settings=frozenset({"batch_tokens"}),
    exporter="qkv.ctranslate2.export:export_language_model",
    precisions=True,
)

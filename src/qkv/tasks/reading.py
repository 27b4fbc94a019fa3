"""Reading comprehension end to end: train a reader on questions about passages, answer new ones,
and score it (accuracy on cloze questions; SQuAD's exact match and F1 on spans).

Two kinds of question, one task:

* **cloze** (Hill et al. 2016's Children's Book Test, Hermann et al. 2015's CNN/Daily Mail): a
  word of the question is blanked out (``XXXXX``) and the reader picks it among ten candidate
  words of the passage (:mod:`qkv.data.cloze`: 20 verses of the Bible or 20 lines of a play,
  the 21st with a name or a common noun removed; held-out books and plays). The family
  ``cloze_reader`` (:mod:`qkv.models.cloze_reader`): no attention (the baseline), Hermann et
  al.'s Attentive Reader, Chen et al. 2016's Stanford Attentive Reader, Kadlec et al. 2016's
  Attention Sum Reader.
* **spans** (SQuAD v1.1, Rajpurkar et al. 2016): the answer is a span of the passage
  (:mod:`qkv.data.squad`: a user's SQuAD files, or the cloze questions written as spans). The
  family ``span_reader`` (:mod:`qkv.models.span_reader`, DrQA's document reader); scored with
  the official metric (:mod:`qkv.evaluation.squad`).

The model family decides which: a cloze reader needs candidates (``data.corpus`` ``cloze`` or
``synthetic``), a span reader reads every corpus as spans. Words, not subwords: the run's
vocabulary is the training split's words (:class:`~qkv.data.word_vocab.WordVocab`, with
per-example slots for unknown words), written to ``vocab.json`` beside the weights.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from qkv.data.errors import DataError
from qkv.data.word_vocab import WordVocab
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.tasks.protocol import TaskSpec
from qkv.tasks.reader import Reader
from qkv.tasks.reading_inputs import (
    CLOZE_FAMILY,
    SPAN_FAMILY,
    VOCAB_FILE,
    ReadingBatch,
    ReadingDataConfig,
    ReadingExample,
    check_reading_config,
    cloze_loss,
    is_cloze,
    load_examples,
    reading_batches,
    reading_tokens,
    span_loss,
)
from qkv.tasks.run_config import PredictConfig, RunConfig
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainConfig

__all__ = ["train_reader"]

logger = logging.getLogger(__name__)


def build_vocab(data: ReadingDataConfig, train: Sequence[ReadingExample]) -> WordVocab:
    return WordVocab.build(
        (words for ex in train for words in (ex.passage, ex.question)),
        min_count=data.min_count,
        max_size=data.max_vocab,
        slots=data.unknown_slots,
        lowercase=data.lowercase,
    )


def reader_model(config: RunConfig, vocab: WordVocab) -> tuple[Any, nn.Module]:
    """The config and the model of ``config``'s family for ``vocab``."""
    values = {**with_preset(config.family, config.model), "vocab_size": len(vocab)}
    values.pop("preset", None)
    model_config = build_config(config.family, values)
    return model_config, build_model(config.family, model_config)


def reader_loss(family: str) -> Callable[[nn.Module, ReadingBatch], tuple[Any, Any]]:
    """``(model, batch) -> (summed loss, questions)`` for the training engine."""

    def loss_fn(model: nn.Module, batch: ReadingBatch) -> tuple[Any, Any]:
        out = model(**batch.inputs())
        size = batch.passage.size(0)
        if is_cloze(family):
            assert batch.answer is not None
            return cloze_loss(out.log_probs, batch.answer), torch.tensor(size)
        assert batch.spans is not None and batch.span_keep is not None
        loss = span_loss(out.start_log_probs, out.end_log_probs, batch.spans, batch.span_keep)
        return loss, torch.tensor(size)

    return loss_fn


def train_reader(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> Trained:
    """Train ``config``'s reader; the best weights (by validation accuracy for cloze readers,
    validation F1 for span readers) go to ``config.out_dir``. Arguments as
    :func:`qkv.tasks.translation.train_translation`."""
    check_reading_config(config)
    run = TrainingRun(config, task="reading", resume=resume, overwrite=overwrite,
                      distributed=distributed, progress=progress,
                      handle_signals=handle_signals)  # fmt: skip
    data = config.section("data", ReadingDataConfig)
    examples = load_examples(config)
    train = [ex for ex in examples["train"] if ex.candidates or ex.spans]
    if not train or not examples["valid"]:
        raise DataError(f"{data.corpus}: the train and valid splits must not be empty")
    vocab = run.shared(
        make=lambda: build_vocab(data, train),
        load=lambda directory: WordVocab.load(directory / VOCAB_FILE),
        save=lambda value, directory: value.save(directory / VOCAB_FILE),
    )
    model_config, model = reader_model(config, vocab)
    run.save(model_config, write=lambda directory: vocab.save(directory / VOCAB_FILE))
    valid = examples["valid"][: data.valid_questions]
    reader = Reader(model, vocab, config)

    def evaluate() -> dict[str, float]:
        was_training = model.training
        model.eval()
        try:
            return reader.score(valid).metrics("valid")
        finally:
            model.train(was_training)

    return run.train(
        model,
        loss_fn=reader_loss(config.family),
        batches=lambda epoch, start: reading_batches(
            train,
            vocab,
            max_tokens=config.train.batch_tokens,
            shuffle=True,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
            anonymize=data.anonymize,
        ),
        evaluate=evaluate,
        metric="valid_accuracy" if is_cloze(config.family) else "valid_f1",
        higher_is_better=True,
        count_tokens=reading_tokens,
    )


TASK = TaskSpec(
    name="reading",
    label="reader",
    input="text",
    families=(CLOZE_FAMILY, SPAN_FAMILY),
    sections={"data": ReadingDataConfig, "train": TrainConfig, "decode": PredictConfig},
    train=train_reader,
    load=Reader.load,
    model_keys=frozenset({"preset"}),
    train_settings=frozenset({"batch_tokens"}),
)

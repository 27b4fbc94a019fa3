"""Reading comprehension end to end: train a reader on questions about passages, answer new ones,
and score it (accuracy on cloze questions; SQuAD's exact match and F1 on spans).

Two kinds of question, one task:

* **cloze** (Hill et al. 2016's Children's Book Test, Hermann et al. 2015's CNN/Daily Mail): a
  word of the question is blanked out (``XXXXX``) and the reader picks it among ten candidate
  words of the passage (:mod:`qkv.data.reading.cloze`: 20 verses of the Bible or 20 lines of a play,
  the 21st with a name or a common noun removed; held-out books and plays). The family
  ``cloze_reader`` (:mod:`qkv.models.cloze_reader`): no attention (the baseline), Hermann et
  al.'s Attentive Reader, Chen et al. 2016's Stanford Attentive Reader, Kadlec et al. 2016's
  Attention Sum Reader.
* **spans** (SQuAD v1.1, Rajpurkar et al. 2016): the answer is a span of the passage
  (:mod:`qkv.data.reading.squad`: a user's SQuAD files, or the cloze questions written as spans),
  scored with the official metric (:mod:`qkv.evaluation.squad`). Two families point with the
  same head: ``span_reader`` (:mod:`qkv.models.span_reader`, DrQA's document reader: BiLSTMs
  over words) and ``encoder_span_reader`` (:mod:`qkv.models.encoder_span_reader`: a Transformer
  encoder, e.g. a fine-tuned MiniLM, ``model.pretrained: minilm``).

The model family decides which: a cloze reader needs candidates (``data.corpus`` ``cloze`` or
``synthetic``), a span reader reads every corpus as spans. The word readers read the training
split's words (:class:`~qkv.data.tokens.word_vocab.WordVocab`, with per-example slots for unknown
words, written to ``vocab.json``); the encoder span reader reads subwords (a BPE, or the
pretrained encoder's WordPiece, written to ``tokenizer.json``) in windows of the passage beside
the question (:mod:`qkv.tasks.reading.inputs`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from qkv.data.errors import DataError
from qkv.tasks.reading.config import ReadingDataConfig
from qkv.tasks.reading.inputs import (
    check_reading_config,
    cloze_loss,
    input_kind,
    is_cloze,
    load_examples,
    span_loss,
)
from qkv.tasks.reading.runner import READING_INPUTS, Reader
from qkv.tasks.run_skeleton import Trained, TrainingRun

logger = logging.getLogger(__name__)


def reader_loss(family: str) -> Callable[[nn.Module, Any], tuple[Any, Any]]:
    """``(model, batch) -> (summed loss, rows)`` for the training engine (a row is a question,
    or a window of one for a subword reader)."""

    def loss_fn(model: nn.Module, batch: Any) -> tuple[Any, Any]:
        out = model(**batch.inputs())
        if is_cloze(family):
            return cloze_loss(out.log_probs, batch.answer), torch.tensor(batch.size)
        loss = span_loss(
            out.start_log_probs, out.end_log_probs, batch.spans, batch.span_keep,
            out.null_log_probs,
        )  # fmt: skip
        return loss, torch.tensor(batch.size)

    return loss_fn


def train_reader(run: TrainingRun) -> Trained:
    """Train ``config``'s reader; the best weights (by validation accuracy for cloze readers,
    validation F1 for span readers) go to ``config.out_dir``."""
    config = run.config
    check_reading_config(config)
    data = config.section("data", ReadingDataConfig)
    examples = load_examples(config)
    train = [ex for ex in examples["train"] if ex.candidates or ex.spans]
    if not train or not examples["valid"]:
        raise DataError(f"{data.corpus}: the train and valid splits must not be empty")
    inputs, model = READING_INPUTS[input_kind(config.family)].prepare(run, data, train)
    valid = examples["valid"][: data.valid_questions]
    reader = Reader(model, inputs, config)

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
        batches=inputs.training_batches(
            train, max_tokens=config.train.batch_tokens, seed=config.train.seed
        ),
        evaluate=evaluate,
        metric="valid_accuracy" if is_cloze(config.family) else "valid_f1",
        higher_is_better=True,
        count_tokens=lambda batch: batch.tokens(),
    )

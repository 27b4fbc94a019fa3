"""Text classification end to end: train an encoder classifier on a labelled corpus (from
scratch, or fine-tuning a pretrained BERT-family encoder such as all-MiniLM-L6-v2), classify new
text, and score it (accuracy, macro-F1, per-label precision/recall/F1).

A trained model directory holds ``config.json`` (``task: classification``, the model, its
labels), ``model.safetensors`` (the best weights by validation accuracy), ``tokenizer.json``
(the BPE trained on the training text, or a copy of the pretrained encoder's vocabulary),
``metrics.csv`` and the run's checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.labelled.sentiment import load_classification_corpus
from qkv.data.pairs.batching import plan_by_cost
from qkv.evaluation.classification import accuracy, macro_f1
from qkv.tasks.classification.config import (
    PAPER_PENALTY_WEIGHT,
    ClassificationDataConfig,
    ClassificationTrainConfig,
)
from qkv.tasks.encoder_inputs import EncoderBatch, TextInputs, collate
from qkv.tasks.encoder_run import prepare_encoder, real_tokens
from qkv.tasks.run_skeleton import Trained, TrainingRun

logger = logging.getLogger(__name__)


# Lin et al. 2017's coefficient of the structured penalty (the bilstm-attention preset's).


def classification_loss(train: ClassificationTrainConfig):
    """``(model, batch) -> (summed loss, examples)`` for the training engine: cross-entropy,
    plus ``train.penalty_weight`` times the structured self-attention penalty
    ``||A A^T - I||_F^2`` (Lin et al. 2017, eq. 8; a batch mean) when the model returns one."""
    weight = PAPER_PENALTY_WEIGHT if train.penalty_weight is None else train.penalty_weight

    def loss_fn(model: nn.Module, batch: EncoderBatch) -> tuple[Tensor, Tensor]:
        assert batch.labels is not None, "a training batch carries its labels"
        out = model(batch.ids, keep=batch.keep)
        size = batch.ids.size(0)
        loss = F.cross_entropy(out.logits.float(), batch.labels, reduction="sum")
        if out.penalty is not None and weight:
            loss = loss + weight * out.penalty * size  # the batch mean, as a sum
        return loss, torch.tensor(size)

    return loss_fn


def encode_examples(inputs: TextInputs, texts: Sequence[str]) -> tuple[list[list[int]], int]:
    """The ids of each text and how many were cut to ``max_len``."""
    encoded = [inputs.encode(text) for text in texts]
    return [ids for ids, _ in encoded], sum(cut for _, cut in encoded)


def example_batches(
    rows: Sequence[list[int]],
    labels: Tensor,
    pad_id: int,
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[EncoderBatch]:
    """Length-grouped batches of at most ``max_tokens`` padded ids (see
    :func:`qkv.data.pairs.batching.plan_by_cost`); ``labels`` indexed like ``rows``."""
    plan = plan_by_cost(
        np.array([len(row) for row in rows]),
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
    )
    for indices in plan[start:]:
        yield collate([rows[i] for i in indices], pad_id, labels[indices])


def train_classifier(run: TrainingRun) -> Trained:
    """Train ``config``'s classifier; the best weights (by validation accuracy) go to
    ``config.out_dir``."""
    config = run.config
    data = config.section("data", ClassificationDataConfig)
    corpus = load_classification_corpus(data.corpus, **data.options)
    encoder = prepare_encoder(
        run,
        labels=corpus.labels,
        label_key="num_labels",
        bpe_text=[ex.text for ex in corpus.train],
    )
    index = {label: i for i, label in enumerate(corpus.labels)}
    train_rows, cut = encode_examples(encoder.inputs, [ex.text for ex in corpus.train])
    if cut:
        logger.info("%d of %d training texts cut to data.max_len", cut, len(train_rows))
    train_labels = torch.tensor([index[ex.label] for ex in corpus.train])
    valid = corpus.valid[: data.valid_examples]  # None: all
    valid_rows, _ = encode_examples(encoder.inputs, [ex.text for ex in valid])
    valid_labels = torch.tensor([index[ex.label] for ex in valid])
    model, pad_id = encoder.model, encoder.inputs.pad_id
    device_of = lambda: next(model.parameters()).device  # noqa: E731

    def evaluate() -> dict[str, float]:
        predicted = []
        for batch in example_batches(
            valid_rows, valid_labels, pad_id, max_tokens=config.train.batch_tokens, shuffle=False
        ):
            batch = batch.to(device_of())
            predicted.extend(model(batch.ids, keep=batch.keep).logits.argmax(-1).tolist())
        gold = valid_labels.tolist()
        return {
            "valid_accuracy": accuracy(gold, predicted),
            "valid_macro_f1": macro_f1(gold, predicted),
        }

    return run.train(
        model,
        loss_fn=classification_loss(config.section("train", ClassificationTrainConfig)),
        batches=lambda epoch, start: example_batches(
            train_rows,
            train_labels,
            pad_id,
            max_tokens=config.train.batch_tokens,
            shuffle=True,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        count_tokens=real_tokens,
    )

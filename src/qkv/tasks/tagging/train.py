"""Sequence tagging end to end (part-of-speech tags): train a tagger on word/tag sentences,
tag new text, and score it (token accuracy, also on words unseen in training).

Tags belong to words, the model reads subwords: each word's tag is predicted at its first
subword (:mod:`qkv.tasks.tagging.inputs`, which also holds the loss and the decoding, softmax or
CRF). Sentences longer than the model's ``max_len`` are trained on in windows of whole words
that share nothing (each word learnt once) and tagged, in validation as by the runner, in
overlapping windows stitched word by word (:func:`~qkv.tasks.tagging.inputs.stitch_sentences`).
A model directory holds what a classifier's does (:mod:`qkv.tasks.encoder_run`), with the tags
in ``labels.json`` and the word-splitting scheme of raw text in ``config.json``
(``data.splitter``). The named-entity task (:mod:`qkv.tasks.ner.task`) trains and runs through
:func:`train_tags` and :class:`.Tagger` too, with its own data, metric and decoding rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from qkv.data.labelled.tagged import TaggedSentence, TaggingCorpus, load_tagging_corpus
from qkv.data.labelled.word_shape import SHAPES
from qkv.evaluation.classification import token_accuracy
from qkv.layers.crf import TransitionRules
from qkv.models.presets import with_preset
from qkv.models.tagger import SequenceTagger
from qkv.tasks.encoder_run import prepare_encoder, real_tokens
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.tagging.config import TaggingDataConfig
from qkv.tasks.tagging.inputs import (
    decode_tags,
    encode_sentences,
    stitch_sentences,
    tagging_batches,
    tagging_loss,
    tagging_overlap,
    word_scores,
)

logger = logging.getLogger(__name__)


def _tag_ids(
    sentences: Sequence[TaggedSentence], index: dict[str, int], split: str
) -> list[list[int]]:
    unknown = sorted({t for s in sentences for t in s.tags} - set(index))
    if unknown:
        raise ValueError(f"the {split} split has tags the training split lacks: {unknown}")
    return [[index[t] for t in s.tags] for s in sentences]


def check_tagger_config(config: RunConfig) -> None:
    """Refuse what a tagger cannot train with before anything is written: label smoothing
    beside a CRF output."""
    if with_preset(config.family, config.model).get("crf") and config.train.label_smoothing:
        raise ValueError(
            f"train.label_smoothing={config.train.label_smoothing} (0.1 when not set) applies to "
            "a softmax output; a CRF tagger (model.crf: true) scores whole tag sequences: set "
            "train.label_smoothing: 0"
        )


def train_tagger(run: TrainingRun) -> Trained:
    """Train ``config``'s tagger; the best weights (by validation token accuracy) go to
    ``config.out_dir``."""
    config = run.config
    check_tagger_config(config)
    data = config.section("data", TaggingDataConfig)
    corpus = load_tagging_corpus(data.corpus, **data.options)

    def accuracy(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
        return {"valid_accuracy": token_accuracy(gold, predicted)}

    return train_tags(run, corpus, accuracy, metric="valid_accuracy", rules=None)


def train_tags(
    run: TrainingRun,
    corpus: TaggingCorpus,
    score: Callable[[list[list[str]], list[list[str]]], dict[str, float]],
    *,
    metric: str,
    rules: Callable[[Sequence[str]], TransitionRules] | None,
) -> Trained:
    """Train ``run``'s tagger on ``corpus``; ``score(gold, predicted)`` gives the validation
    metrics (tags by name), of which ``metric`` (higher is better) picks the best weights;
    ``rules`` builds the decoding constraints from the tag set (``None``: none)."""
    config = run.config
    encoder = prepare_encoder(
        run,
        labels=corpus.tags,
        label_key="num_tags",
        bpe_text=[" ".join(s.words) for s in corpus.train],
        extra={"num_shapes": len(SHAPES)},
    )
    index = {tag: i for i, tag in enumerate(corpus.tags)}
    model, pad_id = encoder.model, encoder.inputs.pad_id
    assert isinstance(model, SequenceTagger)  # the one family of tagging and ner
    casing = model.config.casing_dim > 0
    train_examples, _ = encode_sentences(
        encoder.inputs, [s.words for s in corpus.train], _tag_ids(corpus.train, index, "train"),
        casing=casing,
    )  # fmt: skip
    valid_examples, valid_spans = encode_sentences(
        encoder.inputs, [s.words for s in corpus.valid], _tag_ids(corpus.valid, index, "valid"),
        casing=casing, overlap=tagging_overlap(encoder.inputs),
    )  # fmt: skip
    constraints = None if rules is None else rules(corpus.tags)
    gold = [list(s.tags) for s in corpus.valid]

    def evaluate() -> dict[str, float]:
        """The validation metrics, the valid sentences tagged as the runner tags them."""
        device = next(model.parameters()).device
        paths: list[list[int]] = [[] for _ in valid_examples]
        for indices, batch in tagging_batches(
            valid_examples, pad_id, max_tokens=config.train.batch_tokens, shuffle=False
        ):
            batch = batch.to(device)
            decoded = decode_tags(model, word_scores(model, batch), batch.words, constraints)
            for i, path in zip(indices, decoded, strict=True):
                paths[i] = path
        lengths = [len(s.words) for s in corpus.valid]
        ids = stitch_sentences(lengths, valid_examples, valid_spans, paths, constraints)
        return score(gold, [[corpus.tags[t] for t in row] for row in ids])

    return run.train(
        model,
        loss_fn=tagging_loss(config.train.label_smoothing),
        batches=lambda epoch, start: (
            batch
            for _, batch in tagging_batches(
                train_examples,
                pad_id,
                max_tokens=config.train.batch_tokens,
                shuffle=True,
                seed=config.train.seed,
                epoch=epoch,
                start=start,
            )
        ),
        evaluate=evaluate,
        metric=metric,
        higher_is_better=True,
        count_tokens=real_tokens,
    )

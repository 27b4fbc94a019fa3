"""Named-entity recognition end to end: train an entity tagger on BIO-tagged sentences, find
the entities of new text, and score it with entity-level precision, recall and F1.

A task of its own, beside part-of-speech tagging, because four of the five things a task
decides differ: the data (entity corpora, whose files come in BIO, IOB1 or IOBES and are
converted and validated on load: :mod:`qkv.data.labelled.entities`), the metric that picks the
best weights and that ``evaluate`` reports (entity F1 with conlleval's semantics and a bootstrap
interval, per type: :mod:`qkv.evaluation.entities`), the decoding (only valid BIO sequences:
``I-X`` only after ``B-X`` or ``I-X``) and the output (entities as typed spans). The fifth, the
model and its data path, is the tagger's: the same :class:`~qkv.models.tagger.SequenceTagger`
(Transformer, BiLSTM or fine-tuned MiniLM encoder; softmax or CRF output; optional casing
feature) trained by :func:`qkv.tasks.tagging.train.train_tags` and run by
:class:`qkv.tasks.tagging.runner.Tagger`.
"""

from __future__ import annotations

from qkv.data.labelled.entities import load_entity_corpus
from qkv.evaluation.entities import entity_scores
from qkv.layers.crf import bio_transitions
from qkv.tasks.ner.config import EntityDataConfig
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.tagging.train import check_tagger_config, train_tags


def _entity_f1(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    return {"valid_entity_f1": entity_scores(gold, predicted).micro.f1}


def train_entity_tagger(run: TrainingRun) -> Trained:
    """Train ``config``'s entity tagger; the best weights (by validation entity F1, decoded
    as :meth:`.EntityTagger.tag` decodes) go to ``config.out_dir``."""
    config = run.config
    check_tagger_config(config)
    data = config.section("data", EntityDataConfig)
    corpus = load_entity_corpus(data.corpus, **data.options)
    return train_tags(run, corpus, _entity_f1, metric="valid_entity_f1", rules=bio_transitions)

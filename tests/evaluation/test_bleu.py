"""Scores equal sacrebleu's own, and buckets partition the corpus."""

import pytest
import sacrebleu

from qkv.evaluation.bleu import bleu_by_length, corpus_scores

HYP = ["the cat sat on the mat", "a dog barks", "it is raining today in paris", "hello"]
REF = ["the cat sat on a mat", "the dog barks", "it rains today in paris", "hello there"]
SRC = ["le chat", "un chien aboie fort", " ".join(["w"] * 12), " ".join(["w"] * 25)]


def test_corpus_scores_equal_sacrebleu():
    scores = corpus_scores(HYP, REF)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYP, [REF]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYP, [REF]).score)
    assert scores.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert corpus_scores(REF, REF).bleu == pytest.approx(100.0)


def test_buckets_partition_sentences_and_score_each_subset():
    buckets = bleu_by_length(SRC, HYP, REF, edges=(0, 10, 20))
    assert [(b.label, b.sentences) for b in buckets] == [("0-9", 2), ("10-19", 1), ("20+", 1)]
    assert buckets[0].bleu == pytest.approx(sacrebleu.corpus_bleu(HYP[:2], [REF[:2]]).score)


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="strictly increasing"):
        bleu_by_length(SRC, HYP, REF, edges=(0, 20, 10))

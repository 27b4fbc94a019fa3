"""The text-to-text runner: decoding leaves a model's mode alone, copied words come back as the
source's own words, and the scores of a handful of outputs by hand."""

from __future__ import annotations

import pytest
import torch

from qkv.data.pairs.summary_words import SummaryVocab
from qkv.data.tokens.special import SPECIAL_TOKENS
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.tasks.summarisation.config import SummaryDecodeConfig
from qkv.tasks.summarisation.runner import Response, Summariser, score_outputs

VOCAB = SummaryVocab([*SPECIAL_TOKENS, "the", "king", "went"])


def test_respond_keeps_the_models_mode_and_reads_copied_ids_as_source_words():
    torch.manual_seed(0)
    config = Seq2SeqRNNConfig(7, 7, embed_dim=8, hidden_dim=8, dropout=0.5, copy=True)
    model = Seq2SeqRNN(config).train()
    runner = Summariser(model, VOCAB, SummaryDecodeConfig(beam_size=2, min_len=4, max_len=5))
    first = runner.respond(["the Zork king Quab went"])
    assert model.training  # restored
    (again,) = runner.respond(["the Zork king Quab went"])
    (response,) = first
    assert (again.tokens, again.log_prob) == (response.tokens, response.log_prob)  # no dropout
    assert len(response.tokens) >= 4
    assert response.source_tokens == ["the", "zork", "king", "quab", "went", "</s>"]
    for word, copied in zip(response.tokens, response.copied, strict=True):
        assert copied == (word in ("zork", "quab"))
        assert word in VOCAB.words or copied
    with pytest.raises(TypeError):
        runner.respond("a bare string")


def test_scores_by_hand():
    def response(words, copied):
        return Response("s", [], " ".join(words), words, copied, 0.0, None)

    outputs = [response(["a", "b", "c", "a", "b", "c"], [False] * 6),
               response(["zork", "<unk>"], [True, False])]  # fmt: skip
    pairs = [("s1", "a b c"), ("s2", "zork went")]
    report = score_outputs("test", pairs, outputs, beam=2, perplexity=3.5)
    s = report.scores
    # Trigrams: (a b c) (b c a) (c a b) (a b c): one of four repeats; the second output has none.
    assert s["repeated_trigrams"] == pytest.approx(1 / 4)
    assert s["copied_share"] == pytest.approx(1 / 8) and s["unk_share"] == pytest.approx(1 / 8)
    assert s["mean_length"] == 4.0 and s["reference_mean_length"] == 2.5
    assert s["distinct1"] == pytest.approx(5 / 8)  # a b c zork <unk> among 8 words
    assert s["perplexity"] == 3.5 and s["pairs"] == 2.0
    assert 0 < s["rouge1"] < 100 and report.lines()[0] == "test: 2 pairs, beam 2"


@pytest.mark.parametrize(
    ("beam", "error", "message"),
    [
        (100_000, ValueError, "beam_size must be between 1 and 1000, got 100000"),
        (0, ValueError, "beam_size must be between 1 and 1000, got 0"),
        (2.5, TypeError, r"beam_size must be an int, got 2\.5"),
        (True, TypeError, "beam_size must be an int, got True"),
    ],
)
def test_a_beam_translate_refuses_is_refused_before_anything_is_read(beam, error, message):
    """``summarize`` and ``reply`` took any beam (100,000 allocated for 29 s, then crashed);
    they share translation's check (:func:`qkv.decoding.sizes.check_beam_size`)."""
    model = Seq2SeqRNN(Seq2SeqRNNConfig(7, 7, embed_dim=8, hidden_dim=8))
    runner = Summariser(model, VOCAB, SummaryDecodeConfig(max_len=3))
    with pytest.raises(error, match=message):
        runner.respond(["the king went"], beam_size=beam)
    with pytest.raises(error, match=message):
        runner.details("the king went", beam_size=beam)
    with pytest.raises(error, match=message.replace("beam_size", "decode.beam_size")):
        SummaryDecodeConfig(beam_size=beam)


def test_bleu_is_reported_only_where_sacrebleu_defines_it():
    """Perfect two-word summaries printed ``BLEU 0.00`` beside ROUGE 100: sacrebleu's corpus
    BLEU multiplies the 1- to 4-gram precisions, and outputs without a 4-gram make it 0 by
    definition (``effective_order`` would give 100)."""
    from sacrebleu.metrics import BLEU

    def report(texts):
        outputs = [Response("s", [], t, t.split(), [False] * len(t.split()), 0.0, None)
                   for t in texts]  # fmt: skip
        return score_outputs("test", [("s", t) for t in texts], outputs, beam=1, perplexity=1.0)

    short = ["the king", "went home"]
    assert BLEU().corpus_score(short, [short]).score == 0.0  # sacrebleu's own verdict
    assert BLEU(effective_order=True).corpus_score(short, [short]).score == pytest.approx(100.0)
    lines = report(short).lines()
    assert lines[1].startswith("ROUGE-1 100.00")
    assert lines[2].startswith("BLEU undefined (no output has 4 words") and "0.00" not in lines[2]
    assert report(short).scores["bleu_defined"] == 0.0
    long = ["the king went home", "went home"]
    expected = BLEU().corpus_score(long, [long]).score
    assert report(long).lines()[2].startswith(f"BLEU {expected:.2f}  perplexity")
    assert expected == pytest.approx(100.0)

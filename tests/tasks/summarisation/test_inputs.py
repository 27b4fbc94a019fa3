"""Summarisation inputs: examples and batches by hand, the loss against its definition, and the
configuration sections' refusals."""

from __future__ import annotations

import pytest
import torch

from qkv.data.pairs.summary_words import SummaryVocab
from qkv.data.tokens.special import SPECIAL_TOKENS
from qkv.layers.copy import gold_log_probs
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.tasks.summarisation.config import (
    SummaryDataConfig,
    SummaryDecodeConfig,
    SummaryTrainConfig,
)
from qkv.tasks.summarisation.inputs import (
    collate_examples,
    encode_example,
    example_batches,
    text_loss,
)
from qkv.training.losses import sequence_cross_entropy

VOCAB = SummaryVocab([*SPECIAL_TOKENS, "the", "king", "went"])  # V = 7


def test_examples_and_batches_by_hand():
    a = encode_example("The king Zork went", "zork the quab", VOCAB)
    assert (a.src, a.ext, a.oovs) == ([4, 5, 3, 6, 2], [4, 5, 7, 6, 2], ["zork"])
    assert (a.tgt, a.tgt_ext) == ([3, 4, 3], [7, 4, 3])  # quab is in no source: <unk>
    b = encode_example("the king went away", "king", VOCAB, max_source_len=2)
    assert b.src == [4, 5, 2]  # cut to 2 tokens, then </s>
    batch = collate_examples([a, b])
    assert batch.src.tolist() == [[4, 5, 3, 6, 2], [4, 5, 2, 0, 0]]
    assert batch.src_ext.tolist() == [[4, 5, 7, 6, 2], [4, 5, 2, 0, 0]]
    assert batch.src_lengths.tolist() == [5, 3]
    assert batch.tgt_in.tolist() == [[1, 3, 4, 3], [1, 5, 0, 0]]
    assert batch.tgt_out.tolist() == [[3, 4, 3, 2], [5, 2, 0, 0]]
    assert batch.tgt_ext.tolist() == [[7, 4, 3, 2], [5, 2, 0, 0]]
    examples = [a, b] * 10
    plan = list(example_batches(examples, max_tokens=12, shuffle=True, seed=1, epoch=2))
    assert sum(len(x.src) for x in plan) == 20 and all(x.src.numel() <= 12 for x in plan)
    again = list(example_batches(examples, max_tokens=12, shuffle=True, seed=1, epoch=2, start=1))
    assert [x.src.tolist() for x in again] == [x.src.tolist() for x in plan[1:]]


@pytest.mark.parametrize("coverage", [False, True])
def test_the_copy_loss_is_its_definition(coverage):
    torch.manual_seed(0)
    model = Seq2SeqRNN(Seq2SeqRNNConfig(7, 7, embed_dim=8, hidden_dim=8, dropout=0.0, copy=True,
                                        coverage=coverage)).eval()  # fmt: skip
    batch = collate_examples([encode_example("The king Zork went", "zork the quab", VOCAB),
                              encode_example("the king", "king", VOCAB)])  # fmt: skip
    loss, tokens = text_loss(True, 0.5)(model, batch)
    out = model(batch.src, batch.src_lengths, batch.tgt_in, src_ext=batch.src_ext)
    gold = gold_log_probs(out.logits.log_softmax(-1), out.copy, batch.src_ext, batch.tgt_ext)
    keep = batch.tgt_out != 0
    expected = -gold[keep].sum()
    if coverage:
        expected = expected + 0.5 * out.copy.coverage_loss[keep].sum()
    assert int(tokens) == 6 and torch.allclose(loss, expected)


def test_the_plain_loss_is_cross_entropy_with_unknown_targets():
    torch.manual_seed(0)
    model = Seq2SeqRNN(Seq2SeqRNNConfig(7, 7, embed_dim=8, hidden_dim=8, dropout=0.0)).eval()
    batch = collate_examples([encode_example("The king Zork went", "zork the", VOCAB)])
    loss, tokens = text_loss(False, 1.0)(model, batch)
    logits = model(batch.src, batch.src_lengths, batch.tgt_in).logits
    assert torch.equal(loss, sequence_cross_entropy(logits, batch.tgt_out, pad_id=0)[0])
    assert batch.tgt_out.tolist() == [[3, 4, 2]] and int(tokens) == 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SummaryDataConfig(vocab_size=8), "vocab_size must be >= 16"),
        (lambda: SummaryDataConfig(max_source_len=0), "max_source_len"),
        (lambda: SummaryDataConfig(valid_examples=-1), "valid_examples"),
        (lambda: SummaryTrainConfig(coverage_weight=-1.0), "coverage_weight"),
        (lambda: SummaryDecodeConfig(min_len=5, max_len=4), "min_len <= max_len"),
        (lambda: SummaryDecodeConfig(no_repeat_ngram=-1), "no_repeat_ngram"),
        (lambda: SummaryDecodeConfig(beam_size=0), "beam_size"),
    ],
)
def test_bad_settings_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()

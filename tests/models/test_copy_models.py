"""Pointer-generator copying in both encoder-decoders (RNN and Transformer): with ``p_gen = 1``
a copying model is the plain model exactly; decoding step by step (coverage carried) gives what
teacher forcing gives; extended ids are fed back as ``<unk>``; a batch decodes as its sentences
alone; bad settings are refused."""

from __future__ import annotations

import pytest
import torch

from qkv.decoding import beam_search, greedy_search
from qkv.layers.copy import gold_log_probs
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.models.transformer.model import Transformer, TransformerConfig

V = 20


def rnn(**options):
    return Seq2SeqRNN(Seq2SeqRNNConfig(V, V, embed_dim=8, hidden_dim=8, dropout=0.0, **options))


def transformer(**options):
    config = TransformerConfig(
        V, V, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=32,
        dropout=0.0, **options,
    )  # fmt: skip
    return Transformer(config)


MODELS = {"rnn": rnn, "transformer": transformer}

SRC = torch.tensor([[5, 3, 7, 9, 2], [6, 8, 3, 0, 0], [4, 3, 3, 11, 2]])
EXT = torch.tensor([[5, 20, 7, 9, 2], [6, 8, 21, 0, 0], [4, 20, 21, 11, 2]])
LENGTHS = torch.tensor([5, 3, 5])


def pair(make, seed=0, **options):
    """A plain model and a copying one with the same weights, ``p_gen`` forced to 1."""
    torch.manual_seed(seed)
    plain = make().eval()
    copying = make(copy=True, **options).eval()
    missing, unexpected = copying.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("copy_head.") for name in missing)
    with torch.no_grad():
        copying.copy_head.gate.weight.zero_()
        copying.copy_head.gate.bias.fill_(1e4)
    return plain, copying


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("coverage", [False, True])
def test_p_gen_one_is_the_plain_model_exactly(kind, coverage):
    plain, copying = pair(MODELS[kind], coverage=coverage)
    tgt_in = torch.tensor([[1, 5, 7, 9], [1, 6, 8, 2], [1, 4, 4, 11]])
    logits = plain(SRC, LENGTHS, tgt_in).logits
    out = copying(SRC, LENGTHS, tgt_in, src_ext=EXT)
    assert torch.equal(out.logits, logits)
    targets = torch.tensor([[5, 7, 9, 2], [6, 8, 2, 0], [4, 4, 11, 2]])
    gold = gold_log_probs(out.logits.log_softmax(-1), out.copy, EXT, targets)
    assert torch.equal(gold, logits.log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1))
    # Step by step: the first V columns equal the plain model's, token for token.
    a_state = plain.init_state(plain.encode(SRC, LENGTHS))
    b_state = copying.init_state(copying.encode(SRC, LENGTHS, EXT))
    tokens = torch.full((3,), 1)
    for _ in range(4):
        a, b = plain.step(tokens, a_state), copying.step(tokens, b_state)
        assert torch.equal(b.log_probs[:, :V], a.log_probs)
        tokens, a_state, b_state = a.log_probs.argmax(-1), a.state, b.state
    hyps = greedy_search(plain, SRC, LENGTHS, max_len=6)
    copied = greedy_search(copying, SRC, LENGTHS, EXT, max_len=6)
    assert [h.tokens for h in hyps] == [h.tokens for h in copied]


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("coverage", [False, True])
def test_steps_give_the_teacher_forced_mixture(kind, coverage):
    torch.manual_seed(3)
    model = MODELS[kind](copy=True, coverage=coverage).eval()
    tgt_in = torch.tensor([[1, 20, 7, 20], [1, 21, 8, 6], [1, 4, 21, 20]])  # copied words fed
    targets = torch.tensor([[20, 7, 20, 2], [21, 8, 6, 2], [4, 21, 20, 2]])
    out = model(SRC, LENGTHS, tgt_in, src_ext=EXT)
    gold = gold_log_probs(out.logits.log_softmax(-1), out.copy, EXT, targets)  # (B, T)
    state = model.init_state(model.encode(SRC, LENGTHS, EXT))
    for t in range(tgt_in.size(1)):
        step = model.step(tgt_in[:, t], state)
        assert step.log_probs.shape == (3, 22)  # V + the batch's two out-of-vocabulary words
        got = step.log_probs.gather(1, targets[:, t : t + 1]).squeeze(1)
        assert torch.allclose(got, gold[:, t], atol=1e-5)
        assert torch.allclose(step.attention, out.copy.weights[:, t], atol=1e-6)
        state = step.state


@pytest.mark.parametrize("kind", MODELS)
def test_extended_ids_are_fed_back_as_unk(kind):
    torch.manual_seed(4)
    model = MODELS[kind](copy=True).eval()
    with_ext = model(SRC, LENGTHS, torch.tensor([[1, 20, 21]] * 3), src_ext=EXT)
    with_unk = model(SRC, LENGTHS, torch.tensor([[1, 3, 3]] * 3), src_ext=EXT)
    assert torch.equal(with_ext.logits, with_unk.logits)
    assert torch.equal(with_ext.copy.weights, with_unk.copy.weights)


@pytest.mark.parametrize("kind", MODELS)
def test_a_batch_decodes_as_its_sentences_alone(kind):
    torch.manual_seed(5)
    model = MODELS[kind](copy=True, coverage=True).eval()
    batch = beam_search(model, SRC, LENGTHS, EXT, beam_size=3, max_len=6, no_repeat_ngram=2)
    greedy = greedy_search(model, SRC, LENGTHS, EXT, max_len=6)
    for i in range(3):
        n = int(LENGTHS[i])
        alone = (SRC[i : i + 1, :n], LENGTHS[i : i + 1], EXT[i : i + 1, :n])
        (single,) = beam_search(model, *alone, beam_size=3, max_len=6, no_repeat_ngram=2)
        assert [h.tokens for h in batch[i]] == [h.tokens for h in single]
        assert batch[i][0].log_prob == pytest.approx(single[0].log_prob, abs=1e-5)
        (one,) = greedy_search(model, *alone, max_len=6)
        assert greedy[i].tokens == one.tokens


def test_bad_copy_settings_are_refused():
    with pytest.raises(ValueError, match="one vocabulary"):
        Seq2SeqRNNConfig(20, 21, copy=True)
    with pytest.raises(ValueError, match="one vocabulary"):
        TransformerConfig(20, 21, copy=True)
    with pytest.raises(ValueError, match="coverage=True needs copy=True"):
        Seq2SeqRNNConfig(20, 20, coverage=True)
    with pytest.raises(ValueError, match="copy must be true or false"):
        TransformerConfig(20, 20, copy="yes")
    with pytest.raises(ValueError, match="scheduled sampling"):
        Seq2SeqRNNConfig(20, 20, copy=True, teacher_forcing=0.5)
    for make in MODELS.values():
        with pytest.raises(ValueError, match="src_ext is for a copying model"):
            make().encode(SRC, LENGTHS, EXT)
        with pytest.raises(ValueError, match="src_ext must equal src"):
            make(copy=True).encode(SRC, LENGTHS, SRC + 1)

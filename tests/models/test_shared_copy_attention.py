"""See et al.'s one attention (``copy_attention="decoder"``): the copy distribution is the
decoder's own attention, the one that makes the generator's context; coverage enters that
attention's score with ``w_c`` starting at zero (so a coverage phase starts from exactly the
model it continues); the coverage loss is eq. 12 of the decoder's weights; decoding step by step
gives what teacher forcing gives; combinations that have no such attention are refused."""

from __future__ import annotations

import pytest
import torch

from qkv.decoding import beam_search, greedy_search
from qkv.layers.copy import coverage_losses, extended_log_probs, gold_log_probs
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig

V = 20
SRC = torch.tensor([[5, 3, 7, 9, 2], [6, 8, 3, 0, 0], [4, 3, 3, 11, 2]])
EXT = torch.tensor([[5, 20, 7, 9, 2], [6, 8, 21, 0, 0], [4, 20, 21, 11, 2]])
LENGTHS = torch.tensor([5, 3, 5])
TGT_IN = torch.tensor([[1, 5, 20, 9], [1, 6, 21, 2], [1, 4, 4, 11]])


def shared(seed=0, **options) -> Seq2SeqRNN:
    torch.manual_seed(seed)
    config = Seq2SeqRNNConfig(V, V, embed_dim=8, hidden_dim=8, dropout=0.0, copy=True,
                              copy_attention="decoder", **options)  # fmt: skip
    return Seq2SeqRNN(config).eval()


@pytest.mark.parametrize("attention", ["bahdanau", "luong"])
@pytest.mark.parametrize("coverage", [False, True])
def test_the_copy_distribution_is_the_generators_attention_exactly(attention, coverage):
    if coverage and attention == "luong":
        pytest.skip("refused: see test_combinations_without_such_an_attention_are_refused")
    model = shared(attention=attention, coverage=coverage)
    assert model.copy_head.score is None  # no attention of its own: the gate alone
    out = model(SRC, LENGTHS, TGT_IN, src_ext=EXT, need_weights=True)
    assert torch.equal(out.copy.weights, out.attentions["cross"][0][:, 0])  # (B, T, S)
    # And the generator's context is made by those weights: the decoder's attention itself.
    state = model.init_state(model.encode(SRC, LENGTHS, EXT))
    emb = model.tgt_embed(model._fed(TGT_IN))  # extended ids fed as <unk>
    _, weights = model.decoder(emb, state.decoder, need_weights=True)
    assert torch.equal(out.copy.weights, weights)


def test_step_by_step_is_teacher_forcing_with_coverage_carried():
    model = shared(coverage=True)
    with torch.no_grad():
        model.decoder.coverage_weight.normal_()  # coverage that changes the scores
    out = model(SRC, LENGTHS, TGT_IN, src_ext=EXT)
    full = extended_log_probs(out.logits.log_softmax(-1), out.copy, EXT, 22)  # (B, T, Vx)
    state = model.init_state(model.encode(SRC, LENGTHS, EXT))
    for t in range(TGT_IN.size(1)):
        step = model.step(TGT_IN[:, t], state)
        state = step.state
        assert torch.allclose(step.attention, out.copy.weights[:, t], atol=1e-6)
        finite = torch.isfinite(full[:, t])
        assert torch.equal(finite, torch.isfinite(step.log_probs))
        assert torch.allclose(step.log_probs[finite], full[:, t][finite], atol=1e-5)
    # Coverage carried: the last state's coverage is the sum of every step's weights.
    assert torch.allclose(state.decoder.coverage, out.copy.weights.sum(1), atol=1e-6)


def test_coverage_weight_zero_is_the_model_without_coverage_exactly():
    plain = shared(seed=1)
    covered = shared(seed=2, coverage=True)
    missing, unexpected = covered.load_state_dict(plain.state_dict(), strict=False)
    assert missing == ["decoder.coverage_weight"] and not unexpected
    assert not covered.decoder.coverage_weight.count_nonzero()  # zero as built
    a = plain(SRC, LENGTHS, TGT_IN, src_ext=EXT)
    b = covered(SRC, LENGTHS, TGT_IN, src_ext=EXT)
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.copy.weights, b.copy.weights)
    assert torch.equal(a.copy.gate, b.copy.gate)
    assert a.copy.coverage_loss is None and b.copy.coverage_loss is not None
    for search in (lambda m: greedy_search(m, SRC, LENGTHS, EXT, max_len=6),
                   lambda m: [n[0] for n in beam_search(m, SRC, LENGTHS, EXT, beam_size=3,
                                                        max_len=6)]):  # fmt: skip
        for a_hyp, b_hyp in zip(search(plain), search(covered), strict=True):
            assert a_hyp.tokens == b_hyp.tokens and a_hyp.log_prob == b_hyp.log_prob
            assert torch.equal(a_hyp.attention, b_hyp.attention)


def brute_coverage_loss(weights: torch.Tensor) -> torch.Tensor:
    """``sum_i min(a_i^t, sum_{t'<t} a_i^t')`` with Python loops, in float64."""
    batch, steps, length = weights.shape
    out = torch.zeros(batch, steps, dtype=torch.float64)
    for b in range(batch):
        for t in range(steps):
            for i in range(length):
                past = sum(float(weights[b, u, i]) for u in range(t))
                out[b, t] += min(float(weights[b, t, i]), past)
    return out


def test_coverage_loss_by_hand_and_on_the_decoders_weights():
    a = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]])
    # t=0: c=0 -> 0; t=1: c=(.5,.5,0) -> .2+.3+0 = .5; t=2: c=(.7,.8,.5) -> .1+.1+.5 = .7
    assert torch.allclose(coverage_losses(a), torch.tensor([[0.0, 0.5, 0.7]]))
    model = shared(coverage=True)
    with torch.no_grad():
        model.decoder.coverage_weight.normal_()
    out = model(SRC, LENGTHS, TGT_IN, src_ext=EXT)
    expected = brute_coverage_loss(out.copy.weights.detach())
    assert torch.allclose(out.copy.coverage_loss.double(), expected, atol=1e-6)
    assert float(out.copy.coverage_loss[:, 1:].sum().detach()) > 0.1  # not vacuous


def test_gradient_reaches_the_coverage_weight_from_the_loss():
    model = shared(coverage=True).train()
    out = model(SRC, LENGTHS, TGT_IN, src_ext=EXT)
    targets = torch.tensor([[5, 20, 9, 2], [6, 21, 2, 0], [4, 4, 11, 2]])
    gold = gold_log_probs(out.logits.log_softmax(-1), out.copy, EXT, targets)
    (-gold.sum() + out.copy.coverage_loss.sum()).backward()
    grad = model.decoder.coverage_weight.grad
    assert grad is not None and float(grad.abs().sum()) > 0
    assert model.copy_head.gate.weight.grad is not None


def test_the_default_is_todays_model():
    config = Seq2SeqRNNConfig(V, V, copy=True, coverage=True)
    assert config.copy_attention == "own"
    model = Seq2SeqRNN(config)
    names = {name for name, _ in model.named_parameters()}
    assert "copy_head.coverage_weight" in names and "copy_head.score.v.weight" in names
    assert "decoder.coverage_weight" not in names


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"copy_attention": "both"}, "copy_attention"),
        ({"copy": False}, "needs copy=true"),
        ({"attention": "none"}, "attention='none' has none"),
        ({"attention": "luong", "coverage": True}, "attention='luong' has no such score"),
    ],
)
def test_combinations_without_such_an_attention_are_refused(options, message):
    values = {"copy": True, "copy_attention": "decoder", **options}
    with pytest.raises(ValueError, match=message):
        Seq2SeqRNNConfig(V, V, **values)

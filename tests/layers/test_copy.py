"""The pointer-generator's copy head (See et al. 2017): the mixture and the extended vocabulary by
hand, the training term against the whole distribution, coverage recomputed from the weights,
and finite gradients where a probability is zero."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.layers.copy import (
    CopyHead,
    CopyOutput,
    check_extended_ids,
    extended_log_probs,
    gold_log_probs,
)


def _output(weights, p_gen) -> CopyOutput:
    gate = torch.logit(torch.tensor(p_gen, dtype=torch.float64))
    return CopyOutput(torch.tensor(weights, dtype=torch.float64), gate)


def test_mixture_and_extended_vocabulary_by_hand():
    # V = 4; the source holds word 2 twice and one out-of-vocabulary word (extended id 4).
    vocab = torch.tensor([[[0.1, 0.2, 0.3, 0.4]]], dtype=torch.float64).log()  # (1, 1, 4)
    out = _output([[[0.5, 0.3, 0.2]]], [[0.25]])
    ext = torch.tensor([[2, 4, 2]])
    got = extended_log_probs(vocab, out, ext, extended_size=6)[0, 0].exp()
    # p_gen P_vocab + (1 - p_gen) attention mass: word 2 gets 0.25*0.3 + 0.75*(0.5+0.2).
    expected = [0.025, 0.05, 0.075 + 0.525, 0.1, 0.75 * 0.3, 0.0]
    assert got.tolist() == pytest.approx(expected, abs=1e-12)
    assert float(got.sum()) == pytest.approx(1.0, abs=1e-12)
    log_probs = extended_log_probs(vocab, out, ext, extended_size=6)[0, 0]
    assert log_probs[5] == -math.inf  # an extended slot no source token of this row holds
    targets = torch.tensor([[4]])
    assert float(gold_log_probs(vocab, out, ext, targets)) == pytest.approx(math.log(0.225))


def test_gold_log_probs_are_the_whole_distribution_at_the_targets():
    torch.manual_seed(0)
    b, t, s, v, vx = 3, 5, 7, 11, 14
    vocab = torch.randn(b, t, v).log_softmax(-1)
    weights = torch.randn(b, t, s).softmax(-1)
    weights[2, :, 5:] = 0.0  # padding of the last source
    weights[2] /= weights[2].sum(-1, keepdim=True)
    out = CopyOutput(weights, torch.randn(b, t))
    ext = torch.randint(0, vx, (b, s))
    targets = torch.randint(0, vx, (b, t))
    whole = extended_log_probs(vocab, out, ext, vx)  # (B, T, Vx)
    assert torch.allclose(whole.exp().sum(-1), torch.ones(b, t), atol=1e-5)
    gold = gold_log_probs(vocab, out, ext, targets)
    expected = whole.gather(-1, targets[..., None]).squeeze(-1)
    possible = torch.isfinite(expected)
    assert torch.allclose(gold[possible], expected[possible], atol=1e-5)
    assert (gold[~possible] == torch.finfo(gold.dtype).min).all()  # finite, probability zero


def test_gradients_stay_finite_where_a_probability_is_zero():
    vocab = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]]).clamp_min(1e-30).log().requires_grad_()
    weights = torch.tensor([[[1.0, 0.0]]], requires_grad=True)
    gate = torch.tensor([[30.0]], requires_grad=True)  # p_gen = 1 in float32
    out = CopyOutput(weights, gate)
    ext = torch.tensor([[5, 6]])
    # Target 6: outside the vocabulary and under zero attention, so probability zero.
    loss = -gold_log_probs(vocab, out, ext, torch.tensor([[6]])).sum()
    loss.backward()
    for tensor in (vocab, weights, gate):
        assert torch.isfinite(tensor.grad).all()


def test_coverage_loss_and_the_carried_coverage_recomputed_from_the_weights():
    torch.manual_seed(1)
    head = CopyHead(6, 5, 4, attention_dim=8, coverage=True)
    with torch.no_grad():
        head.coverage_weight.normal_()
    memory, keep = torch.randn(2, 4, 5), torch.tensor([[True] * 4, [True, True, True, False]])
    ext = torch.tensor([[4, 5, 6, 7], [8, 9, 4, 0]])
    source = head.prepare(memory, keep, ext, vocab_size=10)
    features, inputs = torch.randn(2, 3, 6), torch.randn(2, 3, 4)
    out, after = head(features, inputs, source)
    coverage = torch.zeros(2, 4)
    for t in range(3):
        a = out.weights[:, t]
        assert torch.allclose(out.coverage_loss[:, t], torch.minimum(a, coverage).sum(-1))
        coverage = coverage + a
    assert torch.allclose(after.coverage, coverage)
    assert (out.weights[1, :, 3] == 0).all()  # padding is never attended
    # Step by step, carrying the coverage, gives the same weights and gate.
    state = source
    for t in range(3):
        step, state = head(features[:, t : t + 1], inputs[:, t : t + 1], state)
        assert torch.allclose(step.weights[:, 0], out.weights[:, t], atol=1e-6)
        assert torch.allclose(step.gate[:, 0], out.gate[:, t], atol=1e-6)


def test_coverage_with_zero_weight_attends_as_without_coverage():
    torch.manual_seed(2)
    plain = CopyHead(6, 5, 4, attention_dim=8)
    covered = CopyHead(6, 5, 4, attention_dim=8, coverage=True)
    covered.load_state_dict(plain.state_dict(), strict=False)  # w_c stays zero
    memory, keep, ext = torch.randn(2, 4, 5), torch.ones(2, 4, dtype=torch.bool), torch.ones(2, 4)
    ext = ext.long()
    features, inputs = torch.randn(2, 3, 6), torch.randn(2, 3, 4)
    a, _ = plain(features, inputs, plain.prepare(memory, keep, ext, 10))
    b, _ = covered(features, inputs, covered.prepare(memory, keep, ext, 10))
    assert torch.allclose(a.weights, b.weights, atol=1e-6)
    assert a.coverage_loss is None and b.coverage_loss is not None


def test_extended_ids_that_disagree_with_the_source_are_refused():
    src = torch.tensor([[5, 3, 7]])
    check_extended_ids(src, torch.tensor([[5, 12, 7]]), vocab_size=10, unk_id=3)
    check_extended_ids(src, src.clone(), vocab_size=10, unk_id=3)  # an unknown word not copied
    for bad in ([[6, 12, 7]], [[5, 4, 7]]):
        with pytest.raises(ValueError, match="src_ext must equal src"):
            check_extended_ids(src, torch.tensor(bad), vocab_size=10, unk_id=3)
    with pytest.raises(ValueError, match="shape of src"):
        check_extended_ids(src, torch.tensor([[5, 12]]), vocab_size=10, unk_id=3)
    head = CopyHead(2, 2, 2, attention_dim=2)
    with pytest.raises(ValueError, match="extended source ids"):
        head.prepare(torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool),
                     torch.zeros(1, 3), 10)  # fmt: skip

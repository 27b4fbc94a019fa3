"""Tests for hard (stochastic) attention, :class:`qkv.attention.hard.HardAttention`.

Xu et al. 2015: pick one key ``s ~ Multinoulli(softmax(score))`` and return ``v_s``; argmax at
evaluation; REINFORCE through ``log_prob``; or straight-through Gumbel-softmax. Distributions are
checked against a float64 softmax built here, sampling against the binomial standard error.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from qkv.attention import (
    Additive,
    Dot,
    General,
    HardAttention,
    HardAttentionOutput,
    Location,
    ScaledDot,
)
from qkv.attention.scores import Score

MODES = ("sample", "gumbel")


def make_score(name: str, dim: int, seed: int) -> Score:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return {
            "scaled_dot": ScaledDot,
            "general": lambda: General(dim),
            "additive": lambda: Additive(dim, dim, 5),
            "location": lambda: Location(dim, 9),
        }[name]()


def reference_log_probs(
    score64: Score, query: Tensor, key: Tensor, keep: Tensor | None
) -> tuple[Tensor, Tensor]:
    """float64 ``(log_softmax over allowed keys, has_key)``; empty rows' log-probs are 0."""
    energies = score64(query, key)  # (B, [H,] Tq, Tk)
    keep = torch.ones_like(energies, dtype=torch.bool) if keep is None else keep.expand_as(energies)
    has_key = keep.any(dim=-1, keepdim=True)
    energies = energies.masked_fill(~keep, -math.inf).masked_fill(~has_key, 0.0)
    return energies.log_softmax(dim=-1).masked_fill(~has_key, 0.0), has_key.squeeze(-1)


def gather_last(t: Tensor, index: Tensor) -> Tensor:
    """The chosen rows: ``t (..., Tk, Dv)`` at ``index (..., Tq)`` gives ``(..., Tq, Dv)``."""
    return t.gather(-2, index[..., None].expand(*index.shape, t.size(-1)))


# --------------------------------------------------------------------------------------------
# Evaluation: argmax, and the context is the chosen value.


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    h=st.sampled_from([None, 1, 3]),
    tq=st.integers(1, 6),
    tk=st.integers(1, 9),
    d=st.integers(1, 6),
    score_name=st.sampled_from(["scaled_dot", "general", "additive", "location"]),
    mode=st.sampled_from(MODES),
    p_keep=st.sampled_from([0.3, 0.7, 1.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_eval_picks_the_most_likely_allowed_key_and_returns_its_value(
    b: int,
    h: int | None,
    tq: int,
    tk: int,
    d: int,
    score_name: str,
    mode: str,
    p_keep: float,
    seed: int,
) -> None:
    gen = torch.Generator().manual_seed(seed)
    lead = (b,) if h is None else (b, h)
    query = torch.randn(*lead, tq, d, generator=gen)
    key = torch.randn(*lead, tk, d, generator=gen)
    value = torch.randn(*lead, tk, 4, generator=gen)
    keep = torch.rand(*lead, tq, tk, generator=gen) < p_keep
    score = make_score(score_name, d, seed)
    hard = HardAttention(score, mode=mode).eval()
    with torch.no_grad():
        out = hard(query, key, value, keep=keep, generator=gen)
    log_probs, has_key = reference_log_probs(
        copy.deepcopy(score).double(), query.double(), key.double(), keep
    )
    probs = log_probs.exp() * has_key[..., None]

    torch.testing.assert_close(out.probs.double(), probs, atol=1e-6, rtol=1e-5)
    index = out.index
    assert index.shape == (*lead, tq)
    rows = has_key
    # The chosen key is allowed and (up to float32 ties) the most likely one.
    assert keep.gather(-1, index[..., None]).squeeze(-1)[rows].all()
    chosen = probs.gather(-1, index[..., None]).squeeze(-1)
    torch.testing.assert_close(chosen[rows], probs.max(dim=-1).values[rows], atol=1e-6, rtol=0)
    # Context is exactly the chosen value; weights are the one-hot choice.
    assert torch.equal(out.context[rows], gather_last(value, index)[rows])
    one_hot = F.one_hot(index, tk).float()
    assert torch.equal(out.weights[rows], one_hot[rows])
    torch.testing.assert_close(
        out.log_prob.double(), chosen.clamp_min(1e-300).log() * rows, atol=1e-6, rtol=1e-5
    )
    # Rows without an allowed key are zero (index 0 by convention).
    assert (out.context[~rows] == 0).all() and (out.weights[~rows] == 0).all()
    assert (out.index[~rows] == 0).all() and (out.log_prob[~rows] == 0).all()
    # Evaluation is deterministic whatever the generator.
    with torch.no_grad():
        again = hard(
            query, key, value, keep=keep, generator=torch.Generator().manual_seed(seed + 1)
        )
    assert torch.equal(again.index, out.index)


# --------------------------------------------------------------------------------------------
# Training: sampling frequencies match the probabilities; masked keys are never drawn.

ROWS = 20_000
# Dot scores with a width-1 query of 1: the energies are the keys themselves. The masked key has
# the largest energy, so a mask ignored anywhere in sampling shows at once.
ENERGIES = torch.tensor([0.0, 1.0, 2.0, -1.0, 3.0, 0.5])
KEEP = torch.tensor([True, True, True, True, False, True])


def sample_rows(hard: HardAttention, seed: int) -> HardAttentionOutput:
    tk = ENERGIES.numel()
    query = torch.ones(ROWS, 1, 1)  # (B, Tq=1, D=1)
    key = ENERGIES.view(1, tk, 1).expand(ROWS, tk, 1)
    value = torch.eye(tk).expand(ROWS, tk, tk)  # context = one-hot of the choice
    generator = torch.Generator().manual_seed(seed)
    return hard(query, key, value, keep=KEEP.view(1, 1, tk), generator=generator)


@pytest.mark.parametrize(
    ("mode", "tau"), [("sample", 1.0), ("gumbel", 1.0), ("gumbel", 0.3), ("gumbel", 3.0)]
)
def test_training_draws_match_probs_and_never_pick_masked_keys(mode: str, tau: float) -> None:
    hard = HardAttention(Dot(), mode=mode, tau=tau).train()
    with torch.no_grad():
        out = sample_rows(hard, seed=0)
    expected = torch.softmax(ENERGIES.double().masked_fill(~KEEP, -math.inf), dim=-1)
    torch.testing.assert_close(out.probs[0, 0].double(), expected, atol=1e-6, rtol=1e-6)

    index = out.index[:, 0]
    counts = torch.bincount(index, minlength=ENERGIES.numel()).double()
    assert counts[~KEEP].sum() == 0, f"masked key drawn {int(counts[~KEEP].sum())} times"
    freq = counts / ROWS
    # Gumbel-max: argmax(logits + Gumbel noise) ~ softmax(logits) whatever the temperature.
    stderr = (expected * (1 - expected) / ROWS).sqrt()
    assert ((freq - expected).abs() <= 5 * stderr + 1e-12).all(), (freq, expected)
    # The context and the weights are the drawn one-hot choice.
    one_hot = F.one_hot(index, ENERGIES.numel()).float()
    torch.testing.assert_close(out.context[:, 0], one_hot, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.weights[:, 0], one_hot, atol=1e-6, rtol=0)
    # The generator decides the draws.
    with torch.no_grad():
        same = sample_rows(hard, seed=0)
        other = sample_rows(hard, seed=1)
    assert torch.equal(same.index, out.index)
    assert not torch.equal(other.index, out.index)


# --------------------------------------------------------------------------------------------
# REINFORCE: log_prob and its gradient.


def general_setup(seed: int) -> tuple[General, Tensor, Tensor, Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    score = make_score("general", 4, seed)
    query = torch.randn(3, 2, 4, generator=gen)
    key = torch.randn(3, 5, 4, generator=gen)
    value = torch.randn(3, 5, 2, generator=gen)
    keep = torch.rand(3, 2, 5, generator=gen) < 0.7
    keep[..., 1] = True  # every row has a key
    return score, query, key, value, keep


@pytest.mark.parametrize("mode", MODES)
def test_log_prob_is_log_of_chosen_prob_with_the_reference_gradient(mode: str) -> None:
    score, query, key, value, keep = general_setup(seed=3)
    query.requires_grad_()
    key.requires_grad_()
    hard = HardAttention(score, mode=mode).train()
    out = hard(query, key, value, keep=keep, generator=torch.Generator().manual_seed(0))
    assert out.log_prob.dtype == torch.float32
    chosen = out.probs.gather(-1, out.index[..., None]).squeeze(-1)
    torch.testing.assert_close(out.log_prob, chosen.log())

    score64 = copy.deepcopy(score).double()
    q64, k64 = (t.detach().double().requires_grad_() for t in (query, key))
    log_probs, _ = reference_log_probs(score64, q64, k64, keep)
    ref = log_probs.gather(-1, out.index[..., None]).squeeze(-1)
    torch.testing.assert_close(out.log_prob.double(), ref, atol=1e-6, rtol=1e-5)

    reward = torch.randn(out.log_prob.shape)
    (out.log_prob * reward).sum().backward()
    (ref * reward.double()).sum().backward()
    assert score.weight.grad is not None and score.weight.grad.abs().sum() > 0
    for ours, theirs in ((score.weight, score64.weight), (query, q64), (key, k64)):
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-5, rtol=1e-4)


def test_reinforce_gradient_ascent_raises_the_rewarded_keys_probability() -> None:
    gen = torch.Generator().manual_seed(1)
    score = make_score("general", 4, seed=0)
    hard = HardAttention(score, mode="sample").train()
    query = torch.randn(1, 1, 4, generator=gen)
    key, value = torch.randn(1, 5, 4, generator=gen), torch.randn(1, 5, 3, generator=gen)
    with torch.no_grad():
        start = hard(query, key, value).probs[0, 0]
    target = int(start.argmin())  # reward the least likely key
    optimizer = torch.optim.SGD(score.parameters(), lr=1.0)
    n = 256
    for _ in range(40):
        out = hard(query.expand(n, 1, 4), key.expand(n, 5, 4), value.expand(n, 5, 3), generator=gen)
        reward = (out.index[:, 0] == target).float()
        loss = -(out.log_prob[:, 0] * reward).mean()  # ascend E[reward]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        end = hard.eval()(query, key, value)
    assert end.probs[0, 0, target] > 0.5 > start[target] + 0.3, (start, end.probs[0, 0])
    assert int(end.index[0, 0]) == target


# --------------------------------------------------------------------------------------------
# Straight-through Gumbel-softmax: one-hot forward, gradient backward.


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_gumbel_weights_are_one_hot_forward_and_pass_gradients(tau: float) -> None:
    score, query, key, value, keep = general_setup(seed=5)
    query.requires_grad_()
    value.requires_grad_()
    hard = HardAttention(score, mode="gumbel", tau=tau).train()
    out = hard(query, key, value, keep=keep, generator=torch.Generator().manual_seed(0))
    one_hot = F.one_hot(out.index, key.size(-2)).float()
    torch.testing.assert_close(out.weights.detach(), one_hot, atol=1e-6, rtol=0)
    assert keep.gather(-1, out.index[..., None]).all(), "a masked key was chosen"
    torch.testing.assert_close(out.context.detach(), gather_last(value.detach(), out.index))
    assert out.weights.requires_grad

    upstream = torch.randn(out.weights.shape, generator=torch.Generator().manual_seed(1))
    (out.weights * upstream).sum().backward()
    assert torch.isfinite(query.grad).all() and query.grad.abs().sum() > 0
    assert score.weight.grad is not None and score.weight.grad.abs().sum() > 0
    query.grad = None
    # Through the context too: the value rows that were not chosen get no gradient.
    out = hard(query, key, value, keep=keep, generator=torch.Generator().manual_seed(0))
    out.context.sum().backward()
    assert query.grad.abs().sum() > 0
    chosen = F.one_hot(out.index, key.size(-2)).sum(dim=-2) > 0  # (B, Tk)
    assert (value.grad.abs().sum(dim=-1) > 0).eq(chosen).all()


# --------------------------------------------------------------------------------------------
# Fully masked rows.


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize(("mode", "tau"), [("sample", 1.0), ("gumbel", 1.0), ("gumbel", 0.1)])
@pytest.mark.parametrize("heads", [False, True], ids=["3d", "4d"])
def test_fully_masked_rows_give_zeros_and_finite_gradients(
    mode: str, tau: float, training: bool, heads: bool
) -> None:
    score, query, key, value, keep = general_setup(seed=7)
    keep[0, 1] = False  # batch 0, query 1: no key
    keep[2] = False  # batch 2: no key for any query
    if heads:  # (B, H=2, T, D), a mask broadcast over heads
        query, key, value = (t[:, None].repeat(1, 2, 1, 1) for t in (query, key, value))
        keep = keep[:, None]
    for t in (query, key, value):
        t.requires_grad_()
    empty = ~keep.expand(*query.shape[:-1], key.size(-2)).any(dim=-1)
    assert empty.sum() > 0 and (~empty).sum() > 0
    hard = HardAttention(score, mode=mode, tau=tau).train(training)
    out = hard(query, key, value, keep=keep, generator=torch.Generator().manual_seed(0))

    assert (out.context[empty] == 0).all() and (out.weights[empty] == 0).all()
    assert (out.probs[empty] == 0).all()
    assert (out.index[empty] == 0).all() and (out.log_prob[empty] == 0).all()
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.context).all()
    (out.context.sum() + out.weights.sum() + out.log_prob.sum()).backward()
    for t in (query, key, value, score.weight):
        assert t.grad is not None and torch.isfinite(t.grad).all()
    # The empty rows contribute nothing: their query gets no gradient.
    assert (query.grad[empty] == 0).all()


# --------------------------------------------------------------------------------------------
# Validation.


@pytest.mark.parametrize("mode", ["argmax", "Sample", ""])
def test_bad_mode_raises_and_names_it(mode: str) -> None:
    with pytest.raises(ValueError, match=repr(mode)):
        HardAttention(ScaledDot(), mode=mode)


@pytest.mark.parametrize("tau", [0.0, -1.5, math.nan, math.inf])
def test_bad_tau_raises_and_names_it(tau: float) -> None:
    # tau = inf divides every perturbed logit to 0 or nan: NaN weights, and always key 0.
    with pytest.raises(ValueError, match=str(tau)):
        HardAttention(ScaledDot(), mode="gumbel", tau=tau)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_a_prepared_key_gives_what_the_key_gives(mode: str, training: bool) -> None:
    """``prepared_key=score.prepare(key)`` (Bahdanau's ``U k``, computed once per image by the
    captioner) changes nothing: same choices, probabilities, context and gradients."""
    torch.manual_seed(0)
    score = Additive(6, 6, 5)
    query, key, value = torch.randn(3, 4, 6), torch.randn(3, 7, 6), torch.randn(3, 7, 2)
    keep = torch.rand(3, 4, 7) < 0.7
    hard = HardAttention(score, mode=mode).train(training)
    outs = []
    for prepared in (None, score.prepare(key)):
        q = query.clone().requires_grad_()
        out = hard(q, key, value, keep=keep, generator=torch.Generator().manual_seed(1),
                   prepared_key=prepared)  # fmt: skip
        (grad,) = torch.autograd.grad(out.context.sum() + out.log_prob.sum(), q)
        outs.append((out, grad))
    (a, grad_a), (b, grad_b) = outs
    assert torch.equal(a.index, b.index)
    torch.testing.assert_close(b.probs, a.probs, atol=1e-6, rtol=0)
    torch.testing.assert_close(b.context, a.context, atol=1e-6, rtol=0)
    torch.testing.assert_close(grad_b, grad_a, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=r"prepared_key \(3, 6, 5\) must agree with key"):
        hard(query, key, value, prepared_key=score.prepare(key)[:, :6])

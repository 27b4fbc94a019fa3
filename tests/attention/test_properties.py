"""Property-based tests (hypothesis) for :func:`qkv.attention.attend` and MultiHeadAttention.

Every property runs on both paths of ``attend``: ``need_weights=False`` (the fused SDPA kernel for
dot-product scores) and ``need_weights=True`` (the chunked path), for every score it applies to,
with :data:`qkv.attention.core.CHUNK_ELEMENTS` patched small so that the chunked path also runs on
several query blocks. References are float64 softmaxes built here, without qkv's code; the causal
mask of the reference is built from positions (query ``i`` sits at ``Tk - Tq + i``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from qkv.attention import (
    Additive,
    Dot,
    General,
    Location,
    MultiHeadAttention,
    ScaledDot,
    attend,
    core,
)
from qkv.attention.scores import Score

MAX_T = 9
SCORES = ("scaled_dot", "dot", "general", "additive", "location")
# Location scores by position, not content: it is not permutation-equivariant by design.
CONTENT_SCORES = ("scaled_dot", "dot", "general", "additive")
# Unpatched, one query per chunk, and a few queries per chunk.
CHUNKS = st.sampled_from([core.CHUNK_ELEMENTS, 1, 40])
# Layouts of a keep-mask: which dims of (B, H, Tq, Tk) it spells out.
LAYOUTS = ("bhqk", "b1qk", "b11k", "qk")
ATOL, RTOL = 1e-5, 1e-4  # float32 against the float64 reference


@dataclass(frozen=True)
class Shape:
    b: int
    h: int
    tq: int
    tk: int
    d: int
    seed: int


@st.composite
def shapes(draw: st.DrawFn, *, same_length: bool = False) -> Shape:
    tq = draw(st.integers(1, MAX_T))
    return Shape(
        b=draw(st.integers(1, 3)),
        h=draw(st.integers(1, 4)),
        tq=tq,
        tk=tq if same_length else draw(st.integers(1, MAX_T)),
        d=draw(st.integers(1, 8)),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def make_score(name: str, dim: int, seed: int) -> Score:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if name == "scaled_dot":
            return ScaledDot()
        if name == "dot":
            return Dot()
        if name == "general":
            return General(dim)
        if name == "additive":
            return Additive(dim, dim, 5)
        if name == "location":
            return Location(dim, MAX_T)
    raise AssertionError(name)


def randn(gen: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(shape, generator=gen) * scale


def random_keep(
    gen: torch.Generator, s: Shape, layout: str, p_keep: float, empty_row: bool
) -> Tensor:
    """A random keep-mask in one of the broadcast layouts; optionally one query row is empty."""
    sizes = {
        "bhqk": (s.b, s.h, s.tq, s.tk),
        "b1qk": (s.b, 1, s.tq, s.tk),
        "b11k": (s.b, 1, 1, s.tk),
        "qk": (s.tq, s.tk),
    }[layout]
    keep = torch.rand(sizes, generator=gen) < p_keep
    if empty_row and layout == "b11k":
        keep[0] = False  # batch 0 has no key at all (every query row of it is empty)
    elif empty_row:
        keep[..., 0, :] = False  # query 0 has no key
    return keep


def full_keep(keep: Tensor | None, s: Shape) -> Tensor:
    if keep is None:
        return torch.ones(s.b, s.h, s.tq, s.tk, dtype=torch.bool)
    return keep.expand(s.b, s.h, s.tq, s.tk)


def bottom_right_causal(tq: int, tk: int) -> Tensor:
    """``(tq, tk)`` keep-mask from absolute positions: query ``i`` is at ``tk - tq + i``."""
    query_pos = torch.arange(tq)[:, None] + (tk - tq)
    return torch.arange(tk)[None, :] <= query_pos


def padding_keep(lengths: Tensor, tk: int) -> Tensor:
    return (torch.arange(tk)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)


def params64(score: Score) -> dict[str, Tensor]:
    """The score's parameters as float64 leaves, by name."""
    return {n: p.detach().double().requires_grad_() for n, p in score.named_parameters()}


def reference_energies(score: Score, p: dict[str, Tensor], query: Tensor, key: Tensor) -> Tensor:
    """Energies from the papers' formulas with the score's parameters ``p``: ``(..., Tq, Tk)``."""
    if isinstance(score, ScaledDot):
        scale = score.scale if score.scale is not None else 1.0 / math.sqrt(query.size(-1))
        return scale * query @ key.transpose(-2, -1)
    if isinstance(score, Dot):
        return query @ key.transpose(-2, -1)
    if isinstance(score, General):
        return query @ p["weight"] @ key.transpose(-2, -1)
    if isinstance(score, Additive):  # v^T tanh(W q + U k + b)
        wq = query @ p["query_proj.weight"].T  # (..., Tq, A)
        uk = key @ p["key_proj.weight"].T + p["key_proj.bias"]  # (..., Tk, A)
        return torch.tanh(wq[..., :, None, :] + uk[..., None, :, :]) @ p["v.weight"][0]
    if isinstance(score, Location):  # W q + b, one output per source position
        energies = (query @ p["proj.weight"].T + p["proj.bias"])[..., : key.size(-2)]
        return energies.expand(*key.shape[:-2], -1, -1)
    raise AssertionError(score)


def reference(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score: Score,
    keep: Tensor | None,
    bias: Tensor | None = None,
    params: dict[str, Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """float64 ``softmax(score(q, k) + bias)`` over allowed keys, zero rows where none is allowed.

    Differentiable with finite gradients (no all ``-inf`` row reaches the softmax): pass float64
    leaves, and ``params`` from :func:`params64` to get the parameters' gradients.
    """
    query, key, value = query.double(), key.double(), value.double()
    energies = reference_energies(score, params64(score) if params is None else params, query, key)
    if bias is not None:
        energies = energies + bias.double()
    keep = torch.ones_like(energies, dtype=torch.bool) if keep is None else keep.expand_as(energies)
    has_key = keep.any(dim=-1, keepdim=True)
    energies = energies.masked_fill(~keep, -math.inf).masked_fill(~has_key, 0.0)
    weights = energies.softmax(dim=-1) * has_key
    return weights @ value, weights


def run(
    chunk: int,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    **kwargs: object,
) -> core.AttentionOutput:
    with mock.patch.object(core, "CHUNK_ELEMENTS", chunk):
        return attend(query, key, value, **kwargs)


def grad_or_zeros(t: Tensor) -> Tensor:
    return torch.zeros_like(t) if t.grad is None else t.grad


# --------------------------------------------------------------------------------------------
# Weights are a distribution over the allowed keys; empty rows are zero.


@settings(max_examples=60, deadline=None)
@given(
    s=shapes(),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    layout=st.sampled_from(LAYOUTS),
    p_keep=st.sampled_from([0.2, 0.6, 1.0]),
    empty_row=st.booleans(),
    chunk=CHUNKS,
)
def test_weights_sum_to_one_over_allowed_keys_and_are_zero_elsewhere(
    s: Shape,
    score_name: str,
    need_weights: bool,
    layout: str,
    p_keep: float,
    empty_row: bool,
    chunk: int,
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    query, key = randn(gen, s.b, s.h, s.tq, s.d), randn(gen, s.b, s.h, s.tk, s.d)
    keep = random_keep(gen, s, layout, p_keep, empty_row)
    score = make_score(score_name, s.d, s.seed)
    # Identity values make the context equal the weights, so the fused path shows them too.
    eye = torch.eye(s.tk).expand(s.b, s.h, s.tk, s.tk).contiguous()
    value = randn(gen, s.b, s.h, s.tk, s.d)
    with torch.no_grad():
        out = run(chunk, query, key, eye, score=score, keep=keep, need_weights=need_weights)
        out_v = run(chunk, query, key, value, score=score, keep=keep, need_weights=need_weights)
    weights = out.context
    if need_weights:
        assert out.weights is not None and out.weights.shape == (s.b, s.h, s.tq, s.tk)
        torch.testing.assert_close(out.weights, weights, atol=1e-6, rtol=0)
        torch.testing.assert_close(out_v.weights, out.weights, atol=0, rtol=0)
    else:
        assert out.weights is None

    allowed = full_keep(keep, s)
    has_key = allowed.any(dim=-1)  # (B, H, Tq)
    assert (weights >= 0).all()
    assert (weights[~allowed] == 0).all(), "masked keys got weight"
    torch.testing.assert_close(
        weights.sum(dim=-1)[has_key], torch.ones(int(has_key.sum())), atol=ATOL, rtol=0
    )
    assert (weights[~has_key] == 0).all(), "a row with no allowed key has non-zero weights"
    assert (out_v.context[~has_key] == 0).all(), "a row with no allowed key has non-zero context"
    assert torch.isfinite(out_v.context).all()

    ref_context, ref_weights = reference(query, key, value, score, keep)
    torch.testing.assert_close(weights.double(), ref_weights, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(out_v.context.double(), ref_context, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("score", [ScaledDot(), Dot(), General(2)], ids=["scaled", "dot", "gen"])
def test_true_means_attend_by_hand(score: Score, need_weights: bool) -> None:
    # A zero query scores every key 0: the context is the plain mean of the *allowed* values.
    query = torch.zeros(1, 1, 2)
    key = torch.randn(1, 3, 2)
    value = torch.tensor([[[1.0], [10.0], [100.0]]])
    keep = torch.tensor([[[True, False, True]]])  # (B, Tq, Tk)
    out = attend(query, key, value, score=score, keep=keep, need_weights=need_weights)
    torch.testing.assert_close(out.context, torch.tensor([[[50.5]]]))
    if need_weights:
        torch.testing.assert_close(out.weights, torch.tensor([[[0.5, 0.0, 0.5]]]))


# --------------------------------------------------------------------------------------------
# Self-attention without positions is permutation-equivariant.


@settings(max_examples=40, deadline=None)
@given(
    s=shapes(same_length=True),
    score_name=st.sampled_from(CONTENT_SCORES),
    need_weights=st.booleans(),
    chunk=CHUNKS,
)
def test_attend_self_attention_is_permutation_equivariant(
    s: Shape, score_name: str, need_weights: bool, chunk: int
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    x = randn(gen, s.b, s.h, s.tq, s.d)
    perm = torch.randperm(s.tq, generator=gen)
    score = make_score(score_name, s.d, s.seed)
    with torch.no_grad():
        out = run(chunk, x, x, x, score=score, need_weights=need_weights)
        xp = x[:, :, perm]
        out_p = run(chunk, xp, xp, xp, score=score, need_weights=need_weights)
    torch.testing.assert_close(out_p.context, out.context[:, :, perm], atol=ATOL, rtol=RTOL)
    if need_weights:
        expected = out.weights[:, :, perm][..., perm]
        torch.testing.assert_close(out_p.weights, expected, atol=ATOL, rtol=RTOL)


@settings(max_examples=30, deadline=None)
@given(
    s=shapes(same_length=True),
    head_dim=st.integers(1, 3),
    need_weights=st.booleans(),
    chunk=CHUNKS,
)
def test_multihead_self_attention_is_permutation_equivariant(
    s: Shape, head_dim: int, need_weights: bool, chunk: int
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    d_model = s.h * head_dim
    with torch.random.fork_rng():
        torch.manual_seed(s.seed)
        mha = MultiHeadAttention(d_model, s.h).eval()
    x = randn(gen, s.b, s.tq, d_model)
    perm = torch.randperm(s.tq, generator=gen)
    with torch.no_grad(), mock.patch.object(core, "CHUNK_ELEMENTS", chunk):
        out = mha(x, need_weights=need_weights)
        out_p = mha(x[:, perm], need_weights=need_weights)
    torch.testing.assert_close(out_p.context, out.context[:, perm], atol=ATOL, rtol=RTOL)
    if need_weights:
        expected = out.weights[:, :, perm][..., perm]
        torch.testing.assert_close(out_p.weights, expected, atol=ATOL, rtol=RTOL)


# --------------------------------------------------------------------------------------------
# Causality: the output at a position ignores every later input.


@settings(max_examples=50, deadline=None)
@given(
    s=shapes(),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    cut=st.integers(0, MAX_T - 1),
    chunk=CHUNKS,
)
def test_attend_causal_output_ignores_later_inputs(
    s: Shape, score_name: str, need_weights: bool, cut: int, chunk: int
) -> None:
    cut = cut % s.tq  # rows 0..cut must not change
    first_future_key = max(0, s.tk - s.tq + cut + 1)  # bottom-right: row cut sees keys <= this - 1
    gen = torch.Generator().manual_seed(s.seed)
    query = randn(gen, s.b, s.h, s.tq, s.d)
    key, value = randn(gen, s.b, s.h, s.tk, s.d), randn(gen, s.b, s.h, s.tk, s.d)
    query2, key2, value2 = query.clone(), key.clone(), value.clone()
    query2[:, :, cut + 1 :] = randn(gen, s.b, s.h, s.tq - cut - 1, s.d, scale=100.0)
    key2[:, :, first_future_key:] = randn(gen, s.b, s.h, s.tk - first_future_key, s.d, scale=100.0)
    value2[:, :, first_future_key:] = 1e4
    score = make_score(score_name, s.d, s.seed)
    kwargs = {"score": score, "is_causal": True, "need_weights": need_weights}
    with torch.no_grad():
        out = run(chunk, query, key, value, **kwargs)
        out2 = run(chunk, query2, key2, value2, **kwargs)
    rows = slice(0, cut + 1)
    torch.testing.assert_close(out2.context[:, :, rows], out.context[:, :, rows], atol=1e-6, rtol=0)
    if need_weights:
        torch.testing.assert_close(
            out2.weights[:, :, rows], out.weights[:, :, rows], atol=1e-6, rtol=0
        )
        assert (out.weights[..., first_future_key:][:, :, rows] == 0).all()


@settings(max_examples=30, deadline=None)
@given(
    s=shapes(same_length=True),
    head_dim=st.integers(1, 3),
    need_weights=st.booleans(),
    cut=st.integers(0, MAX_T - 1),
    chunk=CHUNKS,
)
def test_multihead_causal_output_ignores_later_tokens(
    s: Shape, head_dim: int, need_weights: bool, cut: int, chunk: int
) -> None:
    cut = cut % s.tq
    gen = torch.Generator().manual_seed(s.seed)
    d_model = s.h * head_dim
    with torch.random.fork_rng():
        torch.manual_seed(s.seed)
        mha = MultiHeadAttention(d_model, s.h).eval()
    x = randn(gen, s.b, s.tq, d_model)
    x2 = x.clone()
    x2[:, cut + 1 :] = randn(gen, s.b, s.tq - cut - 1, d_model, scale=100.0)
    with torch.no_grad(), mock.patch.object(core, "CHUNK_ELEMENTS", chunk):
        out = mha(x, is_causal=True, need_weights=need_weights)
        out2 = mha(x2, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(
        out2.context[:, : cut + 1], out.context[:, : cut + 1], atol=1e-5, rtol=0
    )
    if need_weights:
        torch.testing.assert_close(
            out2.weights[:, :, : cut + 1], out.weights[:, :, : cut + 1], atol=1e-6, rtol=0
        )


# --------------------------------------------------------------------------------------------
# Garbage at masked positions does not leak.

GARBAGE = st.sampled_from(["+1e4", "-1e4", "random_huge"])


def garbage_like(gen: torch.Generator, t: Tensor, kind: str) -> Tensor:
    if kind == "random_huge":
        return torch.randn(t.shape, generator=gen) * 1e5
    return torch.full_like(t, float(kind))


@settings(max_examples=50, deadline=None)
@given(
    s=shapes(),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    is_causal=st.booleans(),
    kind=GARBAGE,
    chunk=CHUNKS,
)
def test_attend_ignores_keys_and_values_at_masked_positions(
    s: Shape, score_name: str, need_weights: bool, is_causal: bool, kind: str, chunk: int
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    query = randn(gen, s.b, s.h, s.tq, s.d)
    key, value = randn(gen, s.b, s.h, s.tk, s.d), randn(gen, s.b, s.h, s.tk, s.d)
    lengths = torch.randint(0, s.tk + 1, (s.b,), generator=gen)
    keep = padding_keep(lengths, s.tk)
    padded = ~keep[:, 0, 0, :]  # (B, Tk)
    key2, value2 = key.clone(), value.clone()
    for b in range(s.b):
        key2[b, :, padded[b]] = garbage_like(gen, key2[b, :, padded[b]], kind)
        value2[b, :, padded[b]] = garbage_like(gen, value2[b, :, padded[b]], kind)
    score = make_score(score_name, s.d, s.seed)
    kwargs = {"score": score, "keep": keep, "is_causal": is_causal, "need_weights": need_weights}
    with torch.no_grad():
        out = run(chunk, query, key, value, **kwargs)
        out2 = run(chunk, query, key2, value2, **kwargs)
    allowed = full_keep(keep, s)
    if is_causal:
        allowed = allowed & bottom_right_causal(s.tq, s.tk)
    has_key = allowed.any(dim=-1)
    assert torch.isfinite(out2.context).all()
    torch.testing.assert_close(out2.context[has_key], out.context[has_key], atol=1e-6, rtol=1e-6)
    assert (out2.context[~has_key] == 0).all()
    if need_weights:
        torch.testing.assert_close(out2.weights, out.weights, atol=1e-6, rtol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    s=shapes(same_length=True),
    head_dim=st.integers(1, 3),
    need_weights=st.booleans(),
    is_causal=st.booleans(),
    kind=GARBAGE,
    chunk=CHUNKS,
)
def test_multihead_ignores_padded_tokens(
    s: Shape, head_dim: int, need_weights: bool, is_causal: bool, kind: str, chunk: int
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    d_model = s.h * head_dim
    with torch.random.fork_rng():
        torch.manual_seed(s.seed)
        mha = MultiHeadAttention(d_model, s.h).eval()
    x = randn(gen, s.b, s.tq, d_model)
    lengths = torch.randint(0, s.tq + 1, (s.b,), generator=gen)
    keep = padding_keep(lengths, s.tq)
    real = keep[:, 0, 0, :]  # (B, T): real tokens
    x2 = x.clone()
    x2[~real] = garbage_like(gen, x2[~real], kind)
    with torch.no_grad(), mock.patch.object(core, "CHUNK_ELEMENTS", chunk):
        out = mha(x, keep=keep, is_causal=is_causal, need_weights=need_weights)
        out2 = mha(x2, keep=keep, is_causal=is_causal, need_weights=need_weights)
    # Real tokens (queries) see only real tokens (keys): their outputs may not move.
    torch.testing.assert_close(out2.context[real], out.context[real], atol=1e-5, rtol=1e-5)
    if need_weights:
        w, w2 = out.weights.transpose(1, 2), out2.weights.transpose(1, 2)  # (B, Tq, H, Tk)
        torch.testing.assert_close(w2[real], w[real], atol=1e-6, rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Fully masked rows: zeros, and finite gradients equal to the float64 reference's.


@settings(max_examples=60, deadline=None)
@given(
    s=shapes(),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    layout=st.sampled_from(LAYOUTS),
    p_keep=st.sampled_from([0.0, 0.3, 0.7]),
    is_causal=st.booleans(),
    use_bias=st.booleans(),
    dropout=st.sampled_from([(0.0, True), (0.3, False), (0.3, True)]),
    chunk=CHUNKS,
)
def test_fully_masked_rows_give_zeros_and_finite_gradients(
    s: Shape,
    score_name: str,
    need_weights: bool,
    layout: str,
    p_keep: float,
    is_causal: bool,
    use_bias: bool,
    dropout: tuple[float, bool],
    chunk: int,
) -> None:
    dropout_p, training = dropout
    gen = torch.Generator().manual_seed(s.seed)
    query = randn(gen, s.b, s.h, s.tq, s.d).requires_grad_()
    key = randn(gen, s.b, s.h, s.tk, s.d).requires_grad_()
    value = randn(gen, s.b, s.h, s.tk, s.d).requires_grad_()
    keep = random_keep(gen, s, layout, p_keep, empty_row=True)
    bias = randn(gen, s.b, 1, s.tq, s.tk) if use_bias else None
    upstream = randn(gen, s.b, s.h, s.tq, s.d)  # a generic d(loss)/d(context)
    score = make_score(score_name, s.d, s.seed)
    out = run(
        chunk,
        query,
        key,
        value,
        score=score,
        keep=keep,
        bias=bias,
        is_causal=is_causal,
        dropout_p=dropout_p,
        training=training,
        need_weights=need_weights,
    )
    allowed = full_keep(keep, s)
    if is_causal:
        allowed = allowed & bottom_right_causal(s.tq, s.tk)
    has_key = allowed.any(dim=-1)
    assert not has_key.all()
    assert (out.context[~has_key] == 0).all()
    if need_weights:
        assert (out.weights[~has_key] == 0).all()
    (out.context * upstream).sum().backward()
    params = list(score.parameters())
    for t in (query, key, value, *params):
        assert torch.isfinite(grad_or_zeros(t)).all()

    if dropout_p and training:
        return  # random: finiteness and zero rows are what can be asserted
    # Otherwise the gradients equal the float64 reference's (the empty rows must not poison them).
    p64 = params64(score)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (query, key, value))
    ref_context, _ = reference(q64, k64, v64, score, allowed, bias, p64)
    torch.testing.assert_close(out.context.double(), ref_context, atol=ATOL, rtol=RTOL)
    (ref_context * upstream.double()).sum().backward()
    named = dict(score.named_parameters())
    ours_refs = [(query, q64), (key, k64), (value, v64)] + [(named[n], p64[n]) for n in named]
    for ours, ref in ours_refs:
        torch.testing.assert_close(
            grad_or_zeros(ours).double(), grad_or_zeros(ref), atol=1e-4, rtol=1e-3
        )


# --------------------------------------------------------------------------------------------
# Low precision: as close to float64 as PyTorch's own same-dtype computation.

LOW = {torch.float16: 1e-3, torch.bfloat16: 1e-2}  # epsilon on top of 2 x PyTorch's error


def low_precision_errors(
    dtype: torch.dtype,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    keep: Tensor,
    score: Score,
    scale: float | None,
    need_weights: bool,
) -> tuple[Tensor, float, float]:
    """qkv's low-precision context, its max error and SDPA's same-dtype one, against float64."""
    ref, _ = reference(query, key, value, score, keep)
    q, k, v = (t.to(dtype) for t in (query, key, value))
    ours = attend(q, k, v, score=score, keep=keep, need_weights=need_weights).context
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
    assert ours.dtype == dtype
    err_ours = (ours.double() - ref).abs().max().item()
    err_torch = (theirs.double() - ref).abs().max().item()
    return ours, err_ours, err_torch


@settings(max_examples=40, deadline=None)
@given(
    s=shapes(),
    dtype=st.sampled_from(list(LOW)),
    dot=st.sampled_from([("scaled_dot", None), ("dot", 1.0)]),
    need_weights=st.booleans(),
    logit_std=st.sampled_from([0.25, 1.0]),
)
def test_low_precision_with_padding_is_finite_and_as_accurate_as_torch(
    s: Shape,
    dtype: torch.dtype,
    dot: tuple[str, float | None],
    need_weights: bool,
    logit_std: float,
) -> None:
    # Logits of standard deviation `logit_std` whatever the score's scale (inputs that overflow
    # are test_fp16_scaled_dot_does_not_overflow_before_scaling's).
    score_name, scale = dot
    input_scale = math.sqrt(logit_std) * (1.0 if scale is None else s.d**-0.25)
    gen = torch.Generator().manual_seed(s.seed)
    query = randn(gen, s.b, s.h, s.tq, s.d, scale=input_scale)
    key = randn(gen, s.b, s.h, s.tk, s.d, scale=input_scale)
    value = randn(gen, s.b, s.h, s.tk, s.d)
    lengths = torch.randint(0, s.tk + 1, (s.b,), generator=gen)
    keep = padding_keep(lengths, s.tk)
    score = make_score(score_name, s.d, s.seed)
    with torch.no_grad():
        ours, err_ours, err_torch = low_precision_errors(
            dtype, query, key, value, keep, score, scale, need_weights
        )
    assert torch.isfinite(ours).all()
    assert (ours[(lengths == 0)] == 0).all()
    assert err_ours <= 2 * err_torch + LOW[dtype], (err_ours, err_torch)


@pytest.mark.parametrize("need_weights", [False, True])
def test_fp16_scaled_dot_does_not_overflow_before_scaling(need_weights: bool) -> None:
    # q.k = 80000 overflows float16 (max 65504), but the scaled logit q.k / sqrt(8) = 28284 fits;
    # SDPA scales first and returns a finite result, and qkv must too.
    query = torch.full((1, 1, 2, 8), 100.0, dtype=torch.float16)
    key = query.clone()
    value = torch.randn(1, 1, 2, 8).half()
    out = attend(query, key, value, need_weights=need_weights).context
    expected = F.scaled_dot_product_attention(query, key, value)
    assert torch.isfinite(expected).all()
    assert torch.isfinite(out).all(), "float16 ScaledDot overflowed to inf/NaN"
    torch.testing.assert_close(out, expected, atol=1e-3, rtol=1e-3)


@settings(max_examples=20, deadline=None)
@given(
    s=shapes(same_length=True),
    head_dim=st.integers(1, 3),
    dtype=st.sampled_from(list(LOW)),
    need_weights=st.booleans(),
)
def test_multihead_low_precision_with_padding_is_as_accurate_as_torch(
    s: Shape, head_dim: int, dtype: torch.dtype, need_weights: bool
) -> None:
    d_model = s.h * head_dim
    with torch.random.fork_rng():
        torch.manual_seed(s.seed)
        theirs = nn.MultiheadAttention(d_model, s.h, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    gen = torch.Generator().manual_seed(s.seed)
    x = randn(gen, s.b, s.tq, d_model)
    lengths = torch.randint(1, s.tq + 1, (s.b,), generator=gen)  # nn.MHA: no empty rows
    keep = padding_keep(lengths, s.tq)
    ignore = ~keep[:, 0, 0, :]  # nn.MultiheadAttention's polarity: True = ignore
    with torch.no_grad():
        x64 = x.double()
        ref = copy.deepcopy(theirs).double()(x64, x64, x64, key_padding_mask=ignore)[0]
        xl = x.to(dtype)
        low_theirs = copy.deepcopy(theirs).to(dtype)(xl, xl, xl, key_padding_mask=ignore)[0]
        low_ours = copy.deepcopy(ours).to(dtype)(xl, keep=keep, need_weights=need_weights).context
    assert low_ours.dtype == dtype and torch.isfinite(low_ours).all()
    err_ours = (low_ours.double() - ref).abs().max().item()
    err_torch = (low_theirs.double() - ref).abs().max().item()
    assert err_ours <= 2 * err_torch + LOW[dtype], (err_ours, err_torch)


@settings(max_examples=30, deadline=None)
@given(
    s=shapes(),
    heads=st.sampled_from([(2, 1), (4, 2), (4, 1), (6, 2), (6, 3)]),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    chunk=CHUNKS,
)
def test_grouped_query_attention_equals_repeated_key_value_heads(
    s: Shape, heads: tuple[int, int], score_name: str, need_weights: bool, chunk: int
) -> None:
    h, hkv = heads
    gen = torch.Generator().manual_seed(s.seed)
    query = randn(gen, s.b, h, s.tq, s.d)
    key, value = randn(gen, s.b, hkv, s.tk, s.d), randn(gen, s.b, hkv, s.tk, s.d)
    keep = torch.rand(s.b, h, s.tq, s.tk, generator=gen) < 0.7
    score = make_score(score_name, s.d, s.seed)
    kwargs = {"score": score, "keep": keep, "need_weights": need_weights}
    with torch.no_grad():
        out = run(chunk, query, key, value, **kwargs)
        # Query head i reads key/value head i // (h / hkv).
        k_full = key.repeat_interleave(h // hkv, dim=1)
        v_full = value.repeat_interleave(h // hkv, dim=1)
        expected = run(chunk, query, k_full, v_full, **kwargs)
    torch.testing.assert_close(out.context, expected.context, atol=1e-6, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(out.weights, expected.weights, atol=1e-6, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Causal + padding, and causal with Tq != Tk (bottom-right), against a float64 reference.


@settings(max_examples=60, deadline=None)
@given(
    s=shapes(),
    score_name=st.sampled_from(SCORES),
    need_weights=st.booleans(),
    heads=st.sampled_from([(1, 1), (2, 1), (3, 3), (4, 2), (4, 1), (6, 2), (6, 3)]),
    three_d=st.booleans(),
    with_padding=st.booleans(),
    chunk=CHUNKS,
)
def test_causal_with_padding_and_unequal_lengths_matches_reference(
    s: Shape,
    score_name: str,
    need_weights: bool,
    heads: tuple[int, int],
    three_d: bool,
    with_padding: bool,
    chunk: int,
) -> None:
    gen = torch.Generator().manual_seed(s.seed)
    h, hkv = (1, 1) if three_d else heads  # (query heads, key/value heads): grouped-query
    query = randn(gen, s.b, h, s.tq, s.d)
    key, value = randn(gen, s.b, hkv, s.tk, s.d), randn(gen, s.b, hkv, s.tk, s.d)
    lengths = torch.randint(0, s.tk + 1, (s.b,), generator=gen)
    keep = padding_keep(lengths, s.tk) if with_padding else None  # (B, 1, 1, Tk)
    score = make_score(score_name, s.d, s.seed)

    allowed = bottom_right_causal(s.tq, s.tk).expand(s.b, h, s.tq, s.tk)
    if keep is not None:
        allowed = allowed & keep
    k_full = key.repeat_interleave(h // hkv, dim=1)
    v_full = value.repeat_interleave(h // hkv, dim=1)
    ref_context, ref_weights = reference(query, k_full, v_full, score, allowed)
    if three_d:  # (B, T, D) inputs take a (B, Tq, Tk)-broadcastable mask
        query, key, value = query[:, 0], key[:, 0], value[:, 0]
        keep = None if keep is None else keep[:, 0]  # (B, 1, Tk)
        ref_context, ref_weights = ref_context[:, 0], ref_weights[:, 0]
    kwargs = {"score": score, "keep": keep, "is_causal": True, "need_weights": need_weights}
    with torch.no_grad():
        out = run(chunk, query, key, value, **kwargs)
    torch.testing.assert_close(out.context.double(), ref_context, atol=ATOL, rtol=RTOL)
    if need_weights:
        torch.testing.assert_close(out.weights.double(), ref_weights, atol=ATOL, rtol=RTOL)

"""Non-finite numbers in attention: NaN in gives NaN out, and garbage under masked keys never leaks.

Both paths of :func:`qkv.attention.attend` (``need_weights=False``: SDPA for dot-product scores;
``need_weights=True``: the chunked path) and every score. Before the fix, the fused path returned a
*zero* context for a NaN query row when no mask was given (SDPA's small-input CPU kernel does), and
NaN or inf at padded keys or values reached every output (``0 * nan = nan``).
"""

from __future__ import annotations

import pytest
import torch

from qkv.attention import Additive, Dot, General, Location, MultiHeadAttention, ScaledDot, attend
from qkv.attention.masks import causal_mask, combine_masks, padding_mask

B, H, TQ, TK, D = 2, 3, 4, 6, 8
PATHS = {"fused": False, "chunked": True}
SCORES = {
    "scaled_dot": lambda: ScaledDot(),
    "dot": lambda: Dot(),
    "general": lambda: General(D),
    "additive": lambda: Additive(D, D, 5),
    "location": lambda: Location(D, TK),
}
GARBAGE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "huge": 3e38}
LENGTHS = torch.tensor([TK, 3])  # batch row 1: keys 3.. are padding


def _qkv(seed: int = 0, h: int = H, hkv: int = H):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, h, TQ, D, generator=g),
        torch.randn(B, hkv, TK, D, generator=g),
        torch.randn(B, hkv, TK, D + 1, generator=g),
    )


def _masks():
    pad = padding_mask(LENGTHS, TK)  # (B, 1, 1, TK)
    return {
        "none": (None, False),
        "padding": (pad, False),
        "causal": (None, True),
        "padding+causal": (pad, True),
    }


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("mask", _masks())
@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_non_finite_query_row_gives_nan_in_that_row_only(path, score, mask, value):
    # Additive scores saturate: tanh(W q + U k) is +-1 where W q is infinite, so an infinite (not
    # NaN) query has finite energies, and its row a finite output (checked below).
    saturates = score == "additive" and value == float("inf")
    torch.manual_seed(0)
    scorer = SCORES[score]()
    keep, is_causal = _masks()[mask]
    q, k, v = _qkv()
    bad = q.clone()
    bad[1, 2, 3, 5] = value  # batch 1, head 2, query 3 (which sees a key under every mask)
    kwargs = dict(score=scorer, keep=keep, is_causal=is_causal, need_weights=PATHS[path])
    clean = attend(q, k, v, **kwargs)
    out = attend(bad, k, v, **kwargs)
    if saturates:
        assert torch.isfinite(out.context[1, 2, 3]).all()
        assert not torch.equal(out.context[1, 2, 3], clean.context[1, 2, 3])
    else:
        assert torch.isnan(out.context[1, 2, 3]).all()
    others = torch.ones(B, H, TQ, dtype=torch.bool)
    others[1, 2, 3] = False
    torch.testing.assert_close(out.context[others], clean.context[others], atol=1e-6, rtol=1e-6)
    if PATHS[path]:
        if saturates:  # still a distribution over the keys it may see
            assert torch.isfinite(out.weights[1, 2, 3]).all()
            torch.testing.assert_close(out.weights[1, 2, 3].sum(), torch.tensor(1.0))
        else:
            assert torch.isnan(out.weights[1, 2, 3]).all()


@pytest.mark.parametrize("path", PATHS)
def test_a_non_finite_query_on_3d_inputs_and_through_multihead_attention(path):
    q, k, v = (t[:, 0] for t in _qkv())  # (B, T, D)
    q[0, 1, 0] = float("nan")
    out = attend(q, k, v, need_weights=PATHS[path]).context
    assert torch.isnan(out[0, 1]).all() and torch.isfinite(out[1]).all()
    mha = MultiHeadAttention(D, 2).eval()
    out = mha(q, k, need_weights=PATHS[path]).context
    assert torch.isnan(out[0, 1]).all() and torch.isfinite(out[1]).all()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("where", ["key", "value", "both"])
@pytest.mark.parametrize("causal", [False, True], ids=["padding", "padding+causal"])
def test_garbage_under_padded_keys_never_leaks(path, score, garbage, where, causal):
    """NaN, inf or a huge number at padded positions: outputs and gradients are unchanged."""
    torch.manual_seed(0)
    scorer = SCORES[score]()
    keep = padding_mask(LENGTHS, TK)
    q, k, v = _qkv()
    dirty_k, dirty_v = k.clone(), v.clone()
    if where in ("key", "both"):
        dirty_k[1, :, 3:] = GARBAGE[garbage]
    if where in ("value", "both"):
        dirty_v[1, :, 3:] = GARBAGE[garbage]
    kwargs = dict(score=scorer, keep=keep, is_causal=causal, need_weights=PATHS[path])
    q_clean, q_dirty = q.clone().requires_grad_(), q.clone().requires_grad_()
    clean = attend(q_clean, k, v, **kwargs)
    dirty = attend(q_dirty, dirty_k, dirty_v, **kwargs)
    torch.testing.assert_close(dirty.context, clean.context, atol=1e-6, rtol=1e-6)
    if PATHS[path]:
        torch.testing.assert_close(dirty.weights, clean.weights, atol=1e-7, rtol=0)
    (grad_clean,) = torch.autograd.grad(clean.context.sum(), q_clean)
    (grad_dirty,) = torch.autograd.grad(dirty.context.sum(), q_dirty)
    torch.testing.assert_close(grad_dirty, grad_clean, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_garbage_with_grouped_heads_and_per_head_masks(path):
    """A key/value head is cleared only where every query head of its group is masked."""
    q, k, v = _qkv(h=4, hkv=2)
    keep = torch.ones(B, 4, 1, TK, dtype=torch.bool)
    keep[:, 0:2, :, 4:] = False  # group 0 (heads 0, 1) never sees keys 4, 5
    keep[:, 2, :, 5] = False  # group 1: head 2 masks key 5, head 3 sees it
    dirty_k, dirty_v = k.clone(), v.clone()
    dirty_k[:, 0, 4:], dirty_v[:, 0, 4:] = float("nan"), float("inf")
    kwargs = dict(keep=keep, need_weights=PATHS[path])
    clean, dirty = attend(q, k, v, **kwargs), attend(q, dirty_k, dirty_v, **kwargs)
    torch.testing.assert_close(dirty.context, clean.context, atol=1e-6, rtol=1e-6)


def test_garbage_under_padding_through_a_prepared_key():
    """A recurrent decoder passes ``score.prepare(key)`` once: garbage there must not leak."""
    score = Additive(D, D, 5)
    q, k, v = (t[:, 0] for t in _qkv())  # (B, T, D)
    keep = padding_mask(LENGTHS, TK)[:, 0]  # (B, 1, TK)
    prepared = score.prepare(k)
    dirty_prepared, dirty_v = prepared.clone(), v.clone()
    dirty_prepared[1, 3:], dirty_v[1, 3:] = float("nan"), float("nan")
    clean = attend(q, k, v, score=score, keep=keep, prepared_key=prepared)
    dirty = attend(q, k, dirty_v, score=score, keep=keep, prepared_key=dirty_prepared)
    torch.testing.assert_close(dirty.context, clean.context, atol=1e-6, rtol=1e-6)


def test_a_key_some_query_may_see_is_not_cleared():
    """Under a causal mask key 5 is hidden from query 0 but seen by query 3: its NaN reaches the
    queries that may see it (real input), so nothing was silently zeroed."""
    q, k, v = _qkv()
    keep = combine_masks(causal_mask(TQ, TK), torch.ones(TK, dtype=torch.bool))
    v = v.clone()
    v[:, :, TK - 1] = float("nan")
    out = attend(q, k, v, keep=keep, need_weights=True).context
    assert torch.isnan(out[:, :, -1]).all()

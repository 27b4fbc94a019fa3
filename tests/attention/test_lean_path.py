"""The attention core's lean CPU path gives what the plain one gives, bit for bit.

Two pieces of :func:`qkv.attention.attend` are done cheaply on the CPU, and each must equal its
plain form exactly:

* zeroing the keys and values no query may see (garbage under padding never leaks) is a bitwise
  AND with an integer mask where no gradient is needed, in place for
  ``MultiHeadAttention``'s fresh projections, instead of ``masked_fill``;
* the screen that makes a NaN or inf query row give NaN on the fused path (SDPA's CPU kernels
  give zeros at some sizes) sums the whole query once instead of each row in float32.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from qkv.attention import MultiHeadAttention, attend, core
from qkv.attention.masks import padding_mask

B, H, TQ, TK, D = 2, 4, 5, 7, 6
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _garbage_kv(dtype: torch.dtype, hkv: int = H, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, hkv, TK, D, generator=g).to(dtype)
    v = torch.randn(B, hkv, TK, D + 1, generator=g).to(dtype)
    k[..., -2:, 0], v[..., -1, 1] = float("nan"), float("inf")  # hidden or not, by the mask
    k[..., 0, 1], v[..., 1, 0] = -0.0, float("-inf")  # signed zero and -inf survive bit for bit
    return k, v


def _keeps(hkv: int = H):
    g = torch.Generator().manual_seed(1)
    return {
        "padding": padding_mask(torch.tensor([TK, 3]), TK),  # (B, 1, 1, TK)
        "per-head padding": torch.rand(B, H, 1, TK, generator=g) > 0.4,
        "per-query": torch.rand(B, H, TQ, TK, generator=g) > 0.6,  # a key hidden from every query
        "shared 2-d": torch.rand(TQ, TK, generator=g) > 0.5,
    }


def _plain(keep, key, value):
    """The plain form: masked_fill of every key/value that no query of its head may see."""
    keep = keep.reshape((1,) * (4 - keep.dim()) + tuple(keep.shape))
    visible = keep.any(dim=-2)  # (B|1, H|1, TK)
    hkv = key.size(1)
    if visible.size(1) not in (1, hkv):
        visible = visible.unflatten(1, (hkv, -1)).any(dim=2)
    hidden = ~visible.unsqueeze(-1)
    return key.masked_fill(hidden, 0), value.masked_fill(hidden, 0)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.uint8)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", list(_keeps()))
@pytest.mark.parametrize("hkv", [H, 2], ids=["mha", "grouped"])
@pytest.mark.parametrize("in_place", [False, True], ids=["copy", "in-place"])
def test_zeroing_hidden_keys_equals_masked_fill_bit_for_bit(dtype, kind, hkv, in_place):
    keep = _keeps(hkv)[kind]
    key, value = _garbage_kv(dtype, hkv)
    want_k, want_v = _plain(keep, key, value)
    k_in, v_in = key.clone(), value.clone()
    got_k, got_v, _ = core._clear_hidden_keys(keep, k_in, v_in, None, in_place)
    assert torch.equal(_bits(got_k), _bits(want_k)) and torch.equal(_bits(got_v), _bits(want_v))
    if not in_place:  # the caller's tensors are left alone
        assert torch.equal(_bits(k_in), _bits(key)) and torch.equal(_bits(v_in), _bits(value))


@pytest.mark.parametrize("kind", list(_keeps()))
def test_zeroing_hidden_keys_keeps_masked_fills_gradients(kind):
    """With gradients, first and second order, the zeroing is masked_fill's (the AND has none)."""
    keep = _keeps()[kind]
    key, value = (
        t.double().nan_to_num(posinf=3.0, neginf=-3.0) for t in _garbage_kv(torch.float32)
    )
    key.requires_grad_()
    got = core._clear_hidden_keys(keep, key, value, None, True)[0]  # in_place is ignored here
    want = _plain(keep, key, value)[0]
    weight = torch.randn_like(got)
    (g_got,) = torch.autograd.grad((got * weight).sum(), key)
    (g_want,) = torch.autograd.grad((want * weight).sum(), key)
    assert torch.equal(g_got, g_want)
    assert torch.autograd.gradgradcheck(
        lambda k: core._clear_hidden_keys(keep, k, value, None)[0].sin(), (key,)
    )


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")  # torch's make_dual
def test_a_forward_mode_tangent_is_kept_on_the_chunked_path():
    """The AND has no derivative: a dual tensor must take masked_fill, not lose its tangent."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, H, t, D, generator=g, dtype=torch.float64) for t in (TQ, TK, TK))
    keep, tangent = padding_mask(torch.tensor([TK, 3]), TK), torch.randn_like(k)
    with fwAD.dual_level():
        out = attend(q, fwAD.make_dual(k, tangent), v, keep=keep, need_weights=True).context
        got = fwAD.unpack_dual(out).tangent
    eps = 1e-6  # central difference in float64
    plus, minus = (attend(q, k + s * eps * tangent, v, keep=keep).context for s in (1, -1))
    assert got is not None and got.abs().sum() > 0
    torch.testing.assert_close(got, (plus - minus) / (2 * eps), atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_attend_leaves_its_inputs_alone_unless_told_to_overwrite(need_weights):
    keep = padding_mask(torch.tensor([TK, 3]), TK)
    g = torch.Generator().manual_seed(4)
    q, key, value = (torch.randn(B, H, t, D, generator=g) for t in (TQ, TK, TK))
    key[1, :, 3:], value[1, :, 3:] = float("nan"), float("inf")  # under batch row 1's padding
    k_in, v_in = key.clone(), value.clone()
    plain = attend(q, k_in, v_in, keep=keep, need_weights=need_weights)
    assert torch.equal(_bits(k_in), _bits(key)) and torch.equal(_bits(v_in), _bits(value))
    lean = attend(q, k_in, v_in, keep=keep, need_weights=need_weights, overwrite_kv=True)
    assert torch.equal(lean.context, plain.context) and torch.isfinite(lean.context).all()
    assert torch.equal(_bits(k_in), _bits(_plain(keep, key, value)[0]))  # zeroed where hidden


@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "grad"])
def test_multihead_attention_equals_the_floor_with_a_padding_mask(grad):
    """Four projections around bare SDPA (what docs/results/attention-speed.md calls the floor):
    equal."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(B, TK, 16, requires_grad=grad)
    keep = padding_mask(torch.tensor([TK, 3]), TK)
    with torch.set_grad_enabled(grad):
        ours = mha(x, keep=keep).context

        def heads(proj):
            return proj(x).view(B, TK, 4, 4).transpose(1, 2)

        context = F.scaled_dot_product_attention(
            heads(mha.q_proj), heads(mha.k_proj), heads(mha.v_proj), attn_mask=keep
        )
        floor = mha.out_proj(context.transpose(1, 2).reshape(B, TK, 16))
    torch.testing.assert_close(ours, floor, atol=1e-6, rtol=1e-6)


def test_a_growing_cache_is_not_overwritten_by_the_zeroing():
    """Keys in a cache are the cache's, not scratch: a padded position stays as projected."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(B, TK, 16)
    keep = padding_mask(torch.tensor([TK, 3]), TK)
    cache = mha.new_cache(B, TK)
    with torch.no_grad():
        mha(x, keep=keep, is_causal=True, cache=cache)
        k, v = mha.project_kv(x)
    assert torch.equal(cache.key, k) and torch.equal(cache.value, v)
    assert cache.key[1, :, 3:].abs().sum() > 0  # the padded keys were not zeroed in the cache


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=str)
@pytest.mark.parametrize("length", [4, 128])
def test_a_non_finite_query_row_gives_nan_where_sdpa_gives_zeros(dtype, value, length):
    """SDPA without a mask zeroes such rows at some sizes (bfloat16 inf at 128 keys among them):
    the screen must still catch them, whatever the dtype."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, length, 8, generator=g).to(dtype) for _ in range(3))
    q[0, 1, 2, 3] = value
    for is_causal in (False, True):
        out = attend(q, k, v, is_causal=is_causal).context
        assert torch.isnan(out[0, 1, 2]).all()
        rest = torch.ones(1, 2, length, dtype=torch.bool)
        rest[0, 1, 2] = False
        assert torch.isfinite(out[rest]).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_finite_queries_whose_sum_overflows_are_not_called_non_finite(dtype):
    """The screen's sum can overflow (float16 above 65504; any dtype near its maximum): the exact
    per-row test then decides, and finite rows stay finite."""
    big = torch.finfo(dtype).max / 4
    q = torch.full((1, 2, 6, 8), big, dtype=dtype)  # every row sums to inf
    k, v = torch.zeros(1, 2, 6, 8, dtype=dtype), torch.randn(1, 2, 6, 8).to(dtype)
    out = attend(q, k, v).context
    torch.testing.assert_close(out, v.mean(dim=-2, keepdim=True).expand_as(out), atol=0.02, rtol=0)
    q16 = torch.ones(1, 8, 512, 64, dtype=dtype)  # 262144 ones: the float16 sum would overflow
    assert core._sum_is_finite(q16)

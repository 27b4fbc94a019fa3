"""MultiHeadAttention against torch.nn.MultiheadAttention, float64 gradcheck, caches, GQA."""

import pytest
import torch
from torch import nn
from torch.autograd import gradcheck

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import causal_mask, from_key_padding, padding_mask
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.rotary import RotaryEmbedding
from tests.attention.reference import reference_attention

D, HEADS = 16, 4


def _torch_mha(**kwargs):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(D, HEADS, batch_first=True, **kwargs)
    with torch.no_grad():  # non-zero biases, so that copying them is tested
        for name, p in m.named_parameters():
            if "bias" in name:
                p.normal_()
    return m.eval()


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_from_torch_equals_torch(cross, need_weights):
    kdim = 12 if cross else None
    theirs = _torch_mha(kdim=kdim, vdim=kdim)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(3, 5, D)
    memory = torch.randn(3, 7, kdim) if cross else x
    kpm = torch.zeros(3, memory.size(1), dtype=torch.bool)
    kpm[1, -2:] = True
    kpm[2, 1:] = True
    out_t, w_avg = theirs(x, memory, memory, key_padding_mask=kpm, need_weights=True)
    _, w_heads = theirs(
        x, memory, memory, key_padding_mask=kpm, need_weights=True, average_attn_weights=False
    )
    key = memory if cross else None
    out = ours(x, key, key, keep=from_key_padding(kpm), need_weights=need_weights)
    torch.testing.assert_close(out.context, out_t, atol=1e-5, rtol=1e-5)
    if need_weights:
        assert out.weights.shape == (3, HEADS, 5, memory.size(1))
        torch.testing.assert_close(out.weights, w_heads, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(out.weights.mean(dim=1), w_avg, atol=1e-6, rtol=1e-5)


def test_from_torch_with_causal_mask_and_no_bias():
    theirs = _torch_mha(bias=False)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.q_proj.bias is None
    x = torch.randn(2, 6, D)
    out_t, _ = theirs(x, x, x, attn_mask=~causal_mask(6), need_weights=False)
    torch.testing.assert_close(ours(x, is_causal=True).context, out_t, atol=1e-5, rtol=1e-5)


def test_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(D, HEADS, add_bias_kv=True))


def test_gradcheck_float64():
    torch.manual_seed(0)
    mha = MultiHeadAttention(6, 2, d_k=3, d_v=5, num_kv_heads=1).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    m = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    keep = padding_mask(torch.tensor([5, 2]), 5)
    assert gradcheck(lambda x, m: mha(x, m, keep=keep).context, (x, m), eps=1e-6, atol=1e-5)
    assert gradcheck(lambda x: mha(x, is_causal=True).context, (x,), eps=1e-6, atol=1e-5)


def test_separate_key_and_value_widths():
    mha = MultiHeadAttention(
        D, 2, d_k=3, d_v=7
    )  # the tutorial signature (n_head, d_model, d_k, d_v)
    assert mha.q_proj.out_features == 6 and mha.v_proj.out_features == 14
    assert mha.out_proj.in_features == 14
    out = mha(torch.randn(2, 5, D), need_weights=True)
    assert out.context.shape == (2, 5, D) and out.weights.shape == (2, 2, 5, 5)


def _per_head_reference(mha, x, keep=None, *, causal=False):
    """Heads computed one by one from the module's weights, in float64."""
    b, t, _ = x.shape
    x = x.double()
    q = (x @ mha.q_proj.weight.double().T + mha.q_proj.bias.double()).view(b, t, mha.num_heads, -1)
    k = (x @ mha.k_proj.weight.double().T + mha.k_proj.bias.double()).view(
        b, t, mha.num_kv_heads, -1
    )
    v = (x @ mha.v_proj.weight.double().T + mha.v_proj.bias.double()).view(
        b, t, mha.num_kv_heads, -1
    )
    group = mha.num_heads // mha.num_kv_heads
    full = causal_mask(t) if causal else None
    if keep is not None:
        full = keep if full is None else keep & full
    heads = []
    for h in range(mha.num_heads):
        kh, vh = k[:, :, h // group], v[:, :, h // group]
        mask_h = None if full is None else full[:, 0] if full.dim() == 4 else full
        heads.append(reference_attention(q[:, :, h], kh, vh, mask_h)[0])
    concat = torch.cat(heads, dim=-1)
    return concat @ mha.out_proj.weight.double().T + mha.out_proj.bias.double()


@pytest.mark.parametrize("kv_heads", [1, 2, 4], ids=["multi-query", "grouped", "multi-head"])
def test_grouped_heads_equal_per_head_reference(kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, 4, num_kv_heads=kv_heads)
    assert mha.k_proj.out_features == kv_heads * 4
    x = torch.randn(2, 5, D)
    keep = padding_mask(torch.tensor([5, 3]), 5)
    ref = _per_head_reference(mha, x, keep, causal=True)
    for need_weights in (False, True):
        out = mha(x, keep=keep, is_causal=True, need_weights=need_weights).context
        torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kv_heads", [1, 4])
@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("max_len", [None, 12], ids=["growing", "preallocated"])
def test_kv_cache_one_token_at_a_time_equals_full_causal_forward(kv_heads, rotary, max_len):
    torch.manual_seed(0)
    rope = RotaryEmbedding(D // HEADS) if rotary else None
    mha = MultiHeadAttention(D, HEADS, num_kv_heads=kv_heads, rotary=rope).eval()
    x = torch.randn(2, 9, D)
    full = mha(x, is_causal=True).context
    cache = mha.new_cache(2, max_len)
    steps = [mha(x[:, t : t + 1], is_causal=True, cache=cache).context for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 9


def test_kv_cache_in_chunks_with_left_padding_and_continuation():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, HEADS, rotary=RotaryEmbedding(D // HEADS)).eval()
    x = torch.randn(2, 10, D)
    # Sequence 1 is left-padded by 3: its keys 0..2 are never attended, its positions start at 0.
    keep_keys = torch.ones(2, 10, dtype=torch.bool)
    keep_keys[1, :3] = False
    positions = (keep_keys.cumsum(-1) - 1).clamp_min(0)  # (B, T)
    full = mha(x, keep=keep_keys[:, None, None, :], is_causal=True, positions=positions).context
    cache = mha.new_cache(2)
    outs = []
    for start, end in [(0, 4), (4, 5), (5, 10)]:  # a prompt, one step, then a longer chunk
        keep = keep_keys[:, None, None, :end]
        outs.append(
            mha(
                x[:, start:end],
                keep=keep,
                is_causal=True,
                cache=cache,
                positions=positions[:, start:end],
            ).context
        )
    out = torch.cat(outs, dim=1)
    torch.testing.assert_close(out[0], full[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1, 3:], full[1, 3:], atol=1e-5, rtol=1e-5)


def test_static_cache_for_cross_attention():
    mha = MultiHeadAttention(D, HEADS, kdim=10, vdim=10).eval()
    memory, x = torch.randn(2, 7, 10), torch.randn(2, 3, D)
    keep = padding_mask(torch.tensor([7, 4]), 7)
    cache = KVCache.static(*mha.project_kv(memory))
    direct = mha(x, memory, keep=keep).context
    torch.testing.assert_close(mha(x, keep=keep, cache=cache).context, direct)
    with pytest.raises(ValueError, match="static"):
        cache.update(*mha.project_kv(memory))


def test_kv_cache_overflow_and_shape_errors():
    mha = MultiHeadAttention(D, HEADS)
    cache = mha.new_cache(2, 3)
    mha(torch.randn(2, 2, D), cache=cache)
    with pytest.raises(ValueError, match="2 cached \\+ 2 new positions exceed max_len=3"):
        mha(torch.randn(2, 2, D), cache=cache)
    with pytest.raises(ValueError, match=r"\(1, 4, 1, 4\).*\(2, 4, \*, 4\)"):
        cache.update(torch.randn(1, 4, 1, 4), torch.randn(1, 4, 1, 4))


def test_dropout_is_off_in_eval_and_on_in_training():
    mha = MultiHeadAttention(D, HEADS, dropout=0.5)
    x = torch.randn(2, 6, D)
    mha.eval()
    assert torch.equal(mha(x).context, mha(x).context)
    assert torch.equal(mha(x, need_weights=True).context, mha(x, need_weights=True).context)
    mha.train()
    torch.manual_seed(0)
    assert not torch.allclose(mha(x).context, mha.eval()(x).context)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: MultiHeadAttention(10, 3), "d_model=10 is not divisible by num_heads=3"),
        (lambda: MultiHeadAttention(8, 4, num_kv_heads=3), "num_heads=4.*num_kv_heads=3"),
        (lambda: MultiHeadAttention(8, 2, dropout=1.5), "dropout"),
        (lambda: MultiHeadAttention(0, 2), "positive"),
    ],
)
def test_bad_configuration(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_explicit_d_k_allows_any_d_model():
    assert MultiHeadAttention(10, 3, d_k=4)(torch.randn(1, 2, 10)).context.shape == (1, 2, 10)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((torch.randn(2, 3, 8),), {}, r"d_model=16.*\(2, 3, 8\)"),
        ((torch.randn(2, 3, D), torch.randn(2, 4, 8)), {}, r"kdim=16.*\(2, 4, 8\)"),
        ((torch.randn(2, 3, D), torch.randn(3, 4, D)), {}, r"B=2.*\(3, 4, 16\)"),
        ((torch.randn(2, 0, D),), {}, "query length 0"),
        (
            (torch.randn(2, 3, D),),
            {"keep": torch.ones(2, 1, 1, 4, dtype=torch.bool)},
            r"\(2, 1, 1, 4\)",
        ),
    ],
)
def test_bad_input_names_values(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(D, HEADS)(*args, **kwargs)


def test_mask_polarity_true_means_attend():
    # With only key 0 allowed, every query's context is the projection of value 0 alone.
    mha = MultiHeadAttention(D, HEADS).eval()
    x = torch.randn(1, 3, D)
    keep = torch.tensor([True, False, False]).view(1, 1, 1, 3)
    out = mha(x, keep=keep, need_weights=True)
    assert torch.equal(out.weights[..., 1:], torch.zeros(1, HEADS, 3, 2))
    only_first = mha.out_proj(mha.v_proj(x[:, :1])).expand(1, 3, D)
    torch.testing.assert_close(out.context, only_first)


@pytest.mark.parametrize("max_len", [None, 8], ids=["growing", "preallocated"])
def test_kv_cache_select_reorders_rows_and_keeps_growing(max_len):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, HEADS).eval()
    x = torch.randn(3, 4, D)
    cache = mha.new_cache(3, max_len)
    mha(x[:, :3], is_causal=True, cache=cache)
    index = torch.tensor([2, 0, 0])
    picked = cache.select(index)
    assert picked.length == 3 and cache.length == 3
    step = mha(x[index, 3:], is_causal=True, cache=picked).context
    full = mha(x[index], is_causal=True).context
    torch.testing.assert_close(step, full[:, 3:], atol=1e-5, rtol=1e-5)

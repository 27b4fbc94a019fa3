"""The attention core against PyTorch's SDPA and a float64 reference, on both paths."""

import math

import pytest
import torch
import torch.nn.functional as F

from qkv.attention import core
from qkv.attention.core import attend, masked_softmax
from qkv.attention.masks import causal_mask, combine_masks, padding_mask
from qkv.attention.scores import Additive, Dot, General, Location, ScaledDot
from tests.attention.reference import reference_attention

B, H, TQ, TK, D = 2, 3, 5, 7, 8


def _qkv(tq=TQ, tk=TK, h=H, hkv=None, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    hkv = h if hkv is None else hkv
    q = torch.randn(B, h, tq, D, generator=g, dtype=dtype)
    k = torch.randn(B, hkv, tk, D, generator=g, dtype=dtype)
    v = torch.randn(B, hkv, tk, D + 1, generator=g, dtype=dtype)
    return [t.requires_grad_(grad) for t in (q, k, v)]


def _masks(tq=TQ, tk=TK):
    pad = padding_mask(torch.tensor([tk, tk - 3]), tk)
    return {
        "none": (None, False),
        "padding": (pad, False),
        "causal": (None, True),
        "causal+padding": (pad, True),
    }


def _grads(out, inputs):
    return torch.autograd.grad(out.sum(), inputs)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
@pytest.mark.parametrize("kind", ["none", "padding", "causal", "causal+padding"])
@pytest.mark.parametrize("tq", [TQ, TK], ids=["tq<tk", "tq=tk"])
def test_scaled_dot_equals_sdpa_forward_and_backward(kind, need_weights, tq):
    keep, is_causal = _masks(tq, TK)[kind]
    q, k, v = _qkv(tq=tq, grad=True)
    ours = attend(q, k, v, keep=keep, is_causal=is_causal, need_weights=need_weights).context
    full = combine_masks(keep, causal_mask(tq, TK) if is_causal else None)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=full)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    for a, b in zip(_grads(ours, (q, k, v)), _grads(theirs, (q, k, v)), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "causal+padding"])
def test_weights_equal_float64_reference(kind):
    keep, is_causal = _masks()[kind]
    q, k, v = _qkv()
    out = attend(q, k, v, keep=keep, is_causal=is_causal, need_weights=True)
    full = combine_masks(keep, causal_mask(TQ, TK) if is_causal else None)
    ref_context, ref_weights = reference_attention(q, k, v, full)
    torch.testing.assert_close(out.weights.double(), ref_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out.context.double(), ref_context, atol=1e-5, rtol=1e-5)


def test_three_dim_inputs_equal_one_head():
    q, k, v = _qkv(h=1)
    keep = padding_mask(torch.tensor([TK, 2]), TK)[:, 0]  # (B, 1, Tk) for (B, Tq, Tk) inputs
    out3 = attend(q[:, 0], k[:, 0], v[:, 0], keep=keep, need_weights=True)
    out4 = attend(q, k, v, keep=keep[:, None], need_weights=True)
    torch.testing.assert_close(out3.context, out4.context[:, 0])
    torch.testing.assert_close(out3.weights, out4.weights[:, 0])


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_grouped_query_attention_equals_repeated_heads(need_weights):
    q, k, v = _qkv(h=6, hkv=2)
    keep = padding_mask(torch.tensor([TK, 4]), TK)
    grouped = attend(q, k, v, keep=keep, need_weights=need_weights).context
    k_rep, v_rep = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    ref, _ = reference_attention(q, k_rep, v_rep, keep)
    torch.testing.assert_close(grouped.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_bias_is_added_and_a_float_mask_is_refused(need_weights):
    q, k, v = _qkv()
    bias = torch.randn(1, H, TQ, TK)
    keep = padding_mask(torch.tensor([TK, 0]), TK)  # second sequence: every row empty
    out = attend(q, k, v, keep=keep, bias=bias, need_weights=need_weights).context
    ref, _ = reference_attention(q, k, v, keep, bias=bias)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    with pytest.raises(ValueError, match=r"got dtype torch.float32.*bias="):
        attend(q, k, v, keep=bias, need_weights=need_weights)


def test_chunking_does_not_change_results(monkeypatch):
    q, k, v = _qkv(tq=11)
    keep = combine_masks(padding_mask(torch.tensor([TK, 3]), TK), causal_mask(11, TK))
    whole = attend(q, k, v, keep=keep, need_weights=True)
    monkeypatch.setattr(core, "CHUNK_ELEMENTS", B * H * TK * 2)  # two query rows per chunk
    chunked = attend(q, k, v, keep=keep, need_weights=True)
    # Only BLAS blocking may differ between chunk sizes: a few ulp.
    torch.testing.assert_close(chunked.context, whole.context, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(chunked.weights, whole.weights, atol=1e-6, rtol=1e-6)


SCORES = {
    "dot": lambda: Dot(),
    "scaled": lambda: ScaledDot(),
    "general": lambda: General(D, D),
    "additive": lambda: Additive(D, D, 6),
    "location": lambda: Location(D, TK),
}


@pytest.mark.parametrize("score_name", sorted(SCORES))
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_fully_masked_rows_give_zeros_and_finite_gradients(
    score_name, need_weights, training, dropout_p
):
    torch.manual_seed(0)
    score = SCORES[score_name]()
    q, k, v = _qkv(grad=True)
    keep = torch.ones(B, 1, TQ, TK, dtype=torch.bool)
    keep[0, :, 2] = False  # one empty query row
    keep[1] = False  # a whole sequence with no key
    out = attend(
        q,
        k,
        v,
        score=score,
        keep=keep,
        need_weights=need_weights,
        dropout_p=dropout_p,
        training=training,
    )
    assert torch.isfinite(out.context).all()
    assert torch.equal(out.context[0, :, 2], torch.zeros_like(out.context[0, :, 2]))
    assert torch.equal(out.context[1], torch.zeros_like(out.context[1]))
    if need_weights:
        assert torch.equal(out.weights[0, :, 2], torch.zeros_like(out.weights[0, :, 2]))
        assert torch.equal(out.weights[1], torch.zeros_like(out.weights[1]))
    params = [p for p in score.parameters()]
    grads = torch.autograd.grad(out.context.sum(), [q, k, v, *params], allow_unused=True)
    for g in grads:
        assert g is None or torch.isfinite(g).all()


def test_dropout_only_in_training():
    q, k, v = _qkv()
    first = attend(q, k, v, dropout_p=0.5, training=False).context
    second = attend(q, k, v, dropout_p=0.5, training=False).context
    assert torch.equal(first, second)
    torch.testing.assert_close(first, attend(q, k, v).context)
    torch.manual_seed(1)
    dropped = attend(q, k, v, dropout_p=0.5, training=True).context
    assert not torch.allclose(dropped, first)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_low_precision_with_large_energies_never_overflows(dtype, need_weights):
    q, k, v = _qkv(dtype=dtype, grad=True)
    big_q = (q.detach() * 30).requires_grad_()  # energies in the hundreds
    keep = padding_mask(torch.tensor([TK, 1]), TK)
    out = attend(big_q, k, v, keep=keep, need_weights=need_weights)
    assert torch.isfinite(out.context).all()
    grads = _grads(out.context.float(), (big_q, k, v))
    assert all(torch.isfinite(g).all() for g in grads)


def test_masked_softmax_by_hand():
    energies = torch.tensor([[0.0, math.log(3.0), 5.0], [1.0, 2.0, 3.0]])
    keep = torch.tensor([[True, True, False], [False, False, False]])
    expected = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(masked_softmax(energies, keep), expected)


@pytest.mark.parametrize(
    ("shapes", "kwargs", "message"),
    [
        (((2, 0, 4), (2, 3, 4), (2, 3, 4)), {}, "query length 0"),
        (((2, 3, 4), (2, 0, 4), (2, 0, 4)), {}, "key length 0"),
        (((0, 3, 4), (0, 3, 4), (0, 3, 4)), {}, "empty batch"),
        (((2, 3, 4), (2, 3, 5), (2, 3, 4)), {}, "width 4.*width 5"),
        (((2, 3, 4), (3, 3, 4), (3, 3, 4)), {}, "batch 2 differs.*3"),
        (((2, 3, 4), (2, 3, 4), (2, 5, 4)), {}, r"\(2, 3, 4\).*\(2, 5, 4\)"),
        (((2, 3, 4), (2, 3, 4), (2, 3, 4)), {"dropout_p": 1.0}, "dropout_p"),
        (
            ((2, 3, 4), (2, 3, 4), (2, 3, 4)),
            {"keep": torch.ones(2, 3, 4, dtype=torch.bool)},
            r"\(2, 3, 4\).*\(B, Tq, Tk\) = \(2, 3, 3\)",
        ),
    ],
)
def test_bad_input_raises_value_error_naming_values(shapes, kwargs, message):
    q, k, v = (torch.randn(*s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        attend(q, k, v, **kwargs)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("size", [5, 2])
def test_a_one_dim_keep_is_refused_naming_the_shapes(need_weights, size):
    """A 1-d key mask was an IndexError on the fused path (and taken as a row shared by every
    query on the chunked one): it is a (Tk,) row, or a (B,) or (B, Tk) padding mask missing
    its dims, and neither path may guess which."""
    q, k = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8)
    keep = torch.ones(size, dtype=torch.bool)
    message = (
        rf"keep has 1 dim\(s\) \(shape \({size},\)\); a keep-mask needs at least \(Tq, Tk\) "
        r"and broadcasts to \(B, H, Tq, Tk\) = \(2, 4, 3, 5\): .* keep\[:, None, None, :\]"
    )
    with pytest.raises(ValueError, match=message):
        attend(q, k, k, keep=keep, need_weights=need_weights)


def test_heads_must_divide():
    with pytest.raises(ValueError, match="query heads 3 must be a multiple of key/value heads 2"):
        attend(torch.randn(1, 3, 2, 4), torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4))


def test_mixed_dtypes_raise():
    with pytest.raises(ValueError, match=r"float32.*float64"):
        attend(torch.randn(1, 2, 4), torch.randn(1, 2, 4).double(), torch.randn(1, 2, 4))


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_mask_polarity_true_means_attend(need_weights):
    # Two keys with values 10 and 20; the mask allows only the first: the context must be 10.
    q = torch.ones(1, 1, 1)
    k = torch.tensor([[[1.0], [5.0]]])  # key 1 would win by far if it were allowed
    v = torch.tensor([[[10.0], [20.0]]])
    out = attend(q, k, v, keep=torch.tensor([[[True, False]]]), need_weights=need_weights)
    assert out.context.item() == pytest.approx(10.0)
    if need_weights:
        assert out.weights.tolist() == [[[1.0, 0.0]]]


@pytest.mark.parametrize("make_score", [lambda: Additive(6, 6, 4), lambda: General(6), Dot])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("heads", [None, (4, 2)])
def test_prepared_keys_give_what_the_raw_keys_give(make_score, need_weights, heads) -> None:
    torch.manual_seed(0)
    score = make_score()
    lead = (3,) if heads is None else (3, heads[0])
    kv_lead = (3,) if heads is None else (3, heads[1])  # grouped: 2 key/value heads for 4
    query, key = torch.randn(*lead, 2, 6), torch.randn(*kv_lead, 5, 6)
    value = torch.randn(*kv_lead, 5, 7)
    keep = padding_mask(torch.tensor([5, 2, 1]))  # (B, 1, 1, Tk)
    keep = keep[:, 0] if heads is None else keep
    expected = attend(query, key, value, score=score, keep=keep, need_weights=True)
    got = attend(
        query,
        key,
        value,
        score=score,
        keep=keep,
        need_weights=need_weights,
        prepared_key=score.prepare(key),
    )
    torch.testing.assert_close(got.context, expected.context, atol=1e-6, rtol=0)
    if need_weights:
        torch.testing.assert_close(got.weights, expected.weights, atol=1e-6, rtol=0)


def test_prepared_keys_must_match_the_keys() -> None:
    score = Additive(6, 6, 4)
    query, key, value = torch.randn(2, 3, 6), torch.randn(2, 5, 6), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match=r"prepared_key \(2, 4, 4\) must agree with key"):
        attend(query, key, value, score=score, prepared_key=score.prepare(key[:, :4]))


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_mixed_dtypes_under_autocast_are_cast_like_autocast_casts_a_matmul(need_weights):
    # A bfloat16 decoder state attending over float32 encoder states, as in an RNN under
    # autocast: the result is that of all three in bfloat16; outside autocast it is an error.
    q, k, v = _qkv()
    expected = attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), need_weights=need_weights)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = attend(q.bfloat16(), k, v, need_weights=need_weights)
    assert got.context.dtype == torch.bfloat16
    torch.testing.assert_close(got.context, expected.context, atol=0, rtol=0)
    with pytest.raises(ValueError, match="share one floating-point dtype"):
        attend(q.bfloat16(), k, v)

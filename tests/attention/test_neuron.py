"""The neuron view's numbers: the query/key vectors against the projections written out by hand,
the products summing to the raw score, and the softmax of the scaled scores over all keys (masked
ones left out) equal to the weights the module itself returns, for plain, grouped-query, rotary
and cross-attention."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.attention import MultiHeadAttention, RotaryEmbedding, neuron_view
from qkv.attention.masks import padding_mask

pytestmark = pytest.mark.usefixtures("one_thread")


def _module(**kwargs) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(16, 4, **kwargs).eval()


def _scaled_row(module, x, head, i, tk, keep_row=None, **kwargs) -> torch.Tensor:
    """softmax over keys of the views' scaled scores, masked keys left out: ``(Tk,)``."""
    scaled = torch.tensor(
        [
            neuron_view(module, x, head=head, query_position=i, key_position=j, **kwargs).scaled
            for j in range(tk)
        ]
    )
    if keep_row is not None:
        scaled = scaled.masked_fill(~keep_row, -torch.inf)
    return scaled.softmax(-1)


def test_vectors_products_and_score_by_hand():
    module = _module()
    x = torch.randn(2, 5, 16)
    view = neuron_view(module, x, head=2, query_position=3, key_position=1, batch=1)
    dk = module.d_k  # 4
    q_all = x[1] @ module.q_proj.weight.T + module.q_proj.bias  # (T, H*Dk)
    k_all = x[1] @ module.k_proj.weight.T + module.k_proj.bias
    torch.testing.assert_close(view.query, q_all[3, 2 * dk : 3 * dk])
    torch.testing.assert_close(view.key, k_all[1, 2 * dk : 3 * dk])
    torch.testing.assert_close(view.product, view.query * view.key)
    assert view.score == pytest.approx(float(view.product.sum()), abs=1e-6)
    assert view.score == pytest.approx(float(view.query @ view.key), abs=1e-5)
    assert view.scale == 1 / math.sqrt(dk)
    assert view.scaled == pytest.approx(view.score / math.sqrt(dk), abs=1e-6)
    assert (view.head, view.kv_head, view.query_position, view.key_position) == (2, 2, 3, 1)


def test_softmax_of_scaled_scores_equals_the_modules_weights_with_a_mask():
    module = _module()
    x = torch.randn(2, 5, 16)
    keep = padding_mask(torch.tensor([5, 3]))  # (B, 1, 1, Tk)
    assert keep.shape == (2, 1, 1, 5)
    weights = module(x, keep=keep, need_weights=True).weights  # (B, H, Tq, Tk)
    assert weights is not None
    for head in range(4):
        for i in range(5):
            got = _scaled_row(module, x, head, i, 5, keep[1, 0, 0], batch=1, keep=keep)
            torch.testing.assert_close(got, weights[1, head, i], atol=1e-6, rtol=0)
            view = neuron_view(module, x, head=head, query_position=i, key_position=4, keep=keep)
            torch.testing.assert_close(view.weights, weights[0, head, i], atol=1e-6, rtol=0)
    masked = neuron_view(module, x, head=1, query_position=0, key_position=4, batch=1, keep=keep)
    assert masked.weight == 0.0
    assert masked.score != 0.0  # the score is still shown; only the weight is masked


def test_grouped_query_heads_read_their_key_head():
    module = _module(num_kv_heads=2)
    x = torch.randn(1, 6, 16)
    weights = module(x, is_causal=True, need_weights=True).weights
    assert weights is not None
    k_all = x[0] @ module.k_proj.weight.T + module.k_proj.bias  # (T, Hkv*Dk)
    for head in range(4):
        view = neuron_view(module, x, head=head, query_position=4, key_position=2, is_causal=True)
        assert view.kv_head == head // 2
        torch.testing.assert_close(view.key, k_all[2, (head // 2) * 4 : (head // 2 + 1) * 4])
        causal = torch.arange(6) <= 4
        got = _scaled_row(module, x, head, 4, 6, causal, is_causal=True)
        torch.testing.assert_close(got, weights[0, head, 4], atol=1e-6, rtol=0)
        late = neuron_view(module, x, head=head, query_position=4, key_position=5, is_causal=True)
        assert late.weight == 0.0


def test_rotary_is_applied_as_the_module_applies_it():
    module = _module(rotary=RotaryEmbedding(4))
    x = torch.randn(1, 5, 16)
    weights = module(x, need_weights=True).weights
    assert weights is not None
    for head in range(4):
        got = _scaled_row(module, x, head, 2, 5)
        torch.testing.assert_close(got, weights[0, head, 2], atol=1e-6, rtol=0)
    plain = neuron_view(module, x, head=0, query_position=2, key_position=0)
    q_unrotated = (x[0] @ module.q_proj.weight.T + module.q_proj.bias)[2, :4]
    assert not torch.allclose(plain.query, q_unrotated)  # position 2 rotates the query


def test_cross_attention_and_bias():
    module = _module(kdim=8)
    x, memory = torch.randn(1, 3, 16), torch.randn(1, 7, 8)
    bias = torch.randn(1, 4, 3, 7)
    out = module(x, memory, memory[..., :8].repeat(1, 1, 2), bias=bias, need_weights=True)
    assert out.weights is not None
    view = neuron_view(module, x, memory, head=3, query_position=1, key_position=6, bias=bias)
    torch.testing.assert_close(view.weights, out.weights[0, 3, 1], atol=1e-6, rtol=0)
    assert view.weight == pytest.approx(float(out.weights[0, 3, 1, 6].detach()), abs=1e-6)


def test_bad_arguments_are_named():
    module = _module()
    x = torch.randn(1, 5, 16)
    with pytest.raises(ValueError, match=r"head=4 is out of range; pass 0 <= head < 4"):
        neuron_view(module, x, head=4, query_position=0, key_position=0)
    with pytest.raises(ValueError, match=r"key_position=5 is out of range"):
        neuron_view(module, x, head=0, query_position=0, key_position=5)
    with pytest.raises(ValueError, match=r"batch=1 is out of range"):
        neuron_view(module, x, head=0, query_position=0, key_position=0, batch=1)
    with pytest.raises(ValueError, match="dtype"):
        neuron_view(module, x, head=0, query_position=0, key_position=0, keep=torch.ones(5))
    with pytest.raises(ValueError, match=r"keep/bias of shape \(3,\) does not broadcast"):
        neuron_view(module, x, head=0, query_position=0, key_position=0, keep=torch.ones(3).bool())
    with pytest.raises(ValueError, match=r"query must be \(B, Tq, d_model=16\)"):
        neuron_view(module, torch.randn(5, 16), head=0, query_position=0, key_position=0)
    with pytest.raises(TypeError, match="needs a qkv MultiHeadAttention, got MultiheadAttention"):
        neuron_view(torch.nn.MultiheadAttention(16, 4), x, head=0, query_position=0, key_position=0)

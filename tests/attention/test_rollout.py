"""Attention rollout (Abnar & Zuidema 2020) against a float64 loop over the layers written from
eq. 1, and the invariants that would break if the product were taken in the wrong order or the
residual forgotten."""

from __future__ import annotations

import pytest
import torch

from qkv.attention.rollout import attention_rollout

pytestmark = pytest.mark.usefixtures("one_thread")


def _random_layers(layers: int, heads: int = 3, n: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(layers)
    return [torch.randn(2, heads, n, n).softmax(-1) for _ in range(layers)]


def test_equals_a_float64_reference():
    layers = _random_layers(4)
    expected = torch.eye(5, dtype=torch.float64).expand(2, 5, 5)
    for w in layers:  # A_l = (W_l + I) / 2; rollout = A_l @ rollout
        a = 0.5 * w.double().mean(1) + 0.5 * torch.eye(5, dtype=torch.float64)
        expected = a @ expected
    got = attention_rollout(layers)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=0)


def test_rows_sum_to_one_and_order_matters():
    layers = _random_layers(3)
    rolled = attention_rollout(layers)
    torch.testing.assert_close(rolled.sum(-1), torch.ones(2, 5))
    assert not torch.allclose(rolled, attention_rollout(layers[::-1]))


def test_one_layer_without_residual_is_the_head_mean():
    (layer,) = _random_layers(1)
    torch.testing.assert_close(attention_rollout([layer], residual=0.0), layer.mean(1))
    torch.testing.assert_close(
        attention_rollout([layer], residual=1.0), torch.eye(5).expand(2, 5, 5)
    )


def test_max_fusion_renormalises_rows():
    layers = _random_layers(2)
    rolled = attention_rollout(layers, head_fusion="max", residual=0.0)
    torch.testing.assert_close(rolled.sum(-1), torch.ones(2, 5))


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])
    with pytest.raises(ValueError, match=r"layer 1 weights have shape \(2, 3, 4, 4\)"):
        attention_rollout([torch.rand(2, 3, 5, 5), torch.rand(2, 3, 4, 4)])
    with pytest.raises(ValueError, match="head_fusion must be one of mean, max, min"):
        attention_rollout(_random_layers(1), head_fusion="sum")
    with pytest.raises(ValueError, match=r"residual must be in \[0, 1\], got 2"):
        attention_rollout(_random_layers(1), residual=2)
    with pytest.raises(ValueError, match=r"layer 0 weights have dtype torch.int64"):
        attention_rollout([torch.ones(2, 5, 5, dtype=torch.long)])

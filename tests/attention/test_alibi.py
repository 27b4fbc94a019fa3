"""Tests for qkv.attention.alibi: slopes and bias of Press et al. 2022, and use with attend()."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.attention.alibi import alibi_bias, alibi_slopes
from qkv.attention.core import attend


def test_slopes_eight_heads() -> None:
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    slopes = alibi_slopes(8)
    assert slopes.dtype == torch.float32
    assert torch.equal(slopes, expected)


def test_slopes_power_of_two_sizes() -> None:
    assert torch.equal(alibi_slopes(1), torch.tensor([2.0**-8]))
    assert torch.equal(alibi_slopes(2), torch.tensor([2.0**-4, 2.0**-8]))
    assert torch.equal(alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))
    # 16 heads: start and ratio 2^(-1/2)
    expected = torch.tensor([2.0 ** (-h / 2) for h in range(1, 17)])
    torch.testing.assert_close(alibi_slopes(16), expected)


def test_slopes_six_heads_by_hand() -> None:
    # the 4 slopes of 4 heads, then every other slope of 8 heads (1/2, 1/8), two of them
    expected = torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])
    assert torch.equal(alibi_slopes(6), expected)


def test_slopes_twelve_and_three_heads_by_hand() -> None:
    s = math.sqrt(0.5)
    # 8 heads' slopes, then 16 heads' 1st, 3rd, 5th, 7th: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expected = [2.0**-h for h in range(1, 9)] + [s, s / 2, s / 4, s / 8]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))
    # 2 heads' slopes (1/16, 1/256), then 4 heads' first: 1/4
    assert torch.equal(alibi_slopes(3), torch.tensor([2.0**-4, 2.0**-8, 2.0**-2]))


def test_bias_by_hand() -> None:
    bias = alibi_bias(2, 2, 3)  # slopes 1/16, 1/256; queries at absolute positions 1 and 2
    assert bias.shape == (2, 2, 3)
    assert bias.dtype == torch.float32
    distance = torch.tensor([[1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    expected = torch.stack((-distance / 16, -distance / 256))
    assert torch.equal(bias, expected)


def test_bias_square_is_minus_slope_times_distance_below_diagonal() -> None:
    bias = alibi_bias(4, 5, 5)
    slopes = alibi_slopes(4)
    for i in range(5):
        for j in range(i + 1):
            assert bias[:, i, j].tolist() == (-slopes * (i - j)).tolist()


def test_bias_empty_and_errors() -> None:
    assert alibi_bias(3, 0, 4).shape == (3, 0, 4)
    assert alibi_bias(3, 2, 0).shape == (3, 2, 0)
    with pytest.raises(ValueError, match="num_heads must be an integer >= 1, got 0"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="num_heads must be an integer >= 1, got -3"):
        alibi_bias(-3, 2, 2)
    with pytest.raises(ValueError, match="got tq=-1, tk=4"):
        alibi_bias(2, -1, 4)
    with pytest.raises(ValueError, match="got tq=2, tk=-4"):
        alibi_bias(2, 2, -4)


def _reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: list[float]
) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d) - m_h (q_pos - j), causal bottom-right) V, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    tq, tk, d = q.size(-2), k.size(-2), q.size(-1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, Tq, Tk)
    out = torch.zeros((*q.shape[:-1], v.size(-1)), dtype=torch.float64)  # (B, H, Tq, Dv)
    for h, m in enumerate(slopes):
        for i in range(tq):
            q_pos = tk - tq + i
            row = torch.tensor([-m * (q_pos - j) for j in range(q_pos + 1)], dtype=torch.float64)
            weights = torch.softmax(scores[:, h, i, : q_pos + 1] + row, dim=-1)  # (B, q_pos + 1)
            out[:, h, i] = torch.einsum("bj,bjd->bd", weights, v[:, h, : q_pos + 1])
    return out


@pytest.mark.parametrize(("tq", "tk"), [(6, 6), (3, 7), (1, 9)])
@pytest.mark.parametrize("need_weights", [False, True])
def test_attend_with_alibi_matches_float64_reference(tq: int, tk: int, need_weights: bool) -> None:
    torch.manual_seed(0)
    b, h, d = 2, 6, 8
    q = torch.randn(b, h, tq, d)
    k = torch.randn(b, h, tk, d)
    v = torch.randn(b, h, tk, d)
    # hand-written slopes of 6 heads, so the reference does not reuse alibi_slopes
    slopes = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    out = attend(
        q, k, v, bias=alibi_bias(h, tq, tk)[None], is_causal=True, need_weights=need_weights
    )
    ref = _reference_attention(q, k, v, slopes)
    torch.testing.assert_close(out.context.double(), ref, atol=1e-5, rtol=1e-5)


def test_equals_official_key_position_form_under_causal_mask() -> None:
    """The official code adds m_h * j; under the causal mask that gives the same attention."""
    torch.manual_seed(1)
    b, h, tq, tk, d = 1, 4, 4, 10, 8
    q, k, v = torch.randn(b, h, tq, d), torch.randn(b, h, tk, d), torch.randn(b, h, tk, d)
    official = alibi_slopes(h)[:, None, None] * torch.arange(tk, dtype=torch.float32)  # (H, 1, Tk)
    ours = attend(q, k, v, bias=alibi_bias(h, tq, tk)[None], is_causal=True).context
    theirs = attend(q, k, v, bias=official[None], is_causal=True).context
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_bias_changes_attention() -> None:
    """Without the bias the result differs: the test above is not vacuous."""
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    with_bias = attend(q, k, v, bias=alibi_bias(2, 5, 5)[None], is_causal=True).context
    without = attend(q, k, v, is_causal=True).context
    assert not torch.allclose(with_bias, without, atol=1e-3)

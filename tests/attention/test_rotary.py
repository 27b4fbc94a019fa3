"""Tests for qkv.attention.rotary: RoFormer (Su et al. 2021) properties and a complex reference."""

from __future__ import annotations

import pytest
import torch

from qkv.attention.rotary import RotaryEmbedding


def _reference_rope(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """Independent float64 RoPE: pair (i, i + Dh/2) as the complex number x_i + 1j x_{i+Dh/2}."""
    dh = x.size(-1)
    half = dh // 2
    x = x.double()
    pairs = torch.stack((x[..., :half], x[..., half:]), dim=-1)  # (..., Dh/2, 2)
    z = torch.view_as_complex(pairs.contiguous())  # (..., Dh/2)
    theta = base ** (-torch.arange(half, dtype=torch.float64) * 2 / dh)  # (Dh/2,)
    angle = positions.double()[..., None] * theta  # (T, Dh/2) or (B, T, Dh/2)
    if positions.dim() == 2:
        angle = angle[:, None]  # (B, 1, T, Dh/2)
    rotated = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle))  # (..., Dh/2, 2)
    return torch.cat((rotated[..., 0], rotated[..., 1]), dim=-1)  # (..., Dh)


def test_matches_complex_reference_float64() -> None:
    torch.manual_seed(0)
    rope = RotaryEmbedding(16)
    x = torch.randn(2, 3, 7, 16, dtype=torch.float64)
    positions = torch.tensor([0, 1, 2, 5, 100, 4096, 70_000])
    torch.testing.assert_close(rope(x, positions), _reference_rope(x, positions))


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_matches_complex_reference_float32(head_dim: int) -> None:
    torch.manual_seed(1)
    rope = RotaryEmbedding(head_dim, base=500.0)
    x = torch.randn(2, 2, 5, head_dim)
    positions = torch.tensor([3, 0, 9, 31, 2])  # any order, not just arange
    out = rope(x, positions)
    assert out.dtype == torch.float32
    ref = _reference_rope(x, positions, base=500.0)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_rotate_half_layout_pins_which_coordinates_pair() -> None:
    """Coordinate 0 pairs with Dh/2 (not with 1): a unit vector e_0 rotates into e_{Dh/2}."""
    dh = 8
    rope = RotaryEmbedding(dh)
    x = torch.zeros(1, 1, 1, dh, dtype=torch.float64)
    x[..., 0] = 1.0
    out = rope(x, torch.tensor([1]))[0, 0, 0]
    expected = torch.zeros(dh, dtype=torch.float64)
    expected[0], expected[dh // 2] = torch.cos(torch.tensor(1.0)), torch.sin(torch.tensor(1.0))
    torch.testing.assert_close(out, expected)


def test_position_zero_is_identity() -> None:
    x = torch.randn(2, 4, 3, 32)
    out = RotaryEmbedding(32)(x, torch.zeros(3, dtype=torch.long))
    assert torch.equal(out, x)


def test_preserves_norms() -> None:
    torch.manual_seed(2)
    x = torch.randn(3, 2, 50, 16, dtype=torch.float64)
    out = RotaryEmbedding(16)(x, torch.arange(50) * 37)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    # each rotated pair (i, i + Dh/2) keeps its own norm too
    pair_in = x[..., :8] ** 2 + x[..., 8:] ** 2
    pair_out = out[..., :8] ** 2 + out[..., 8:] ** 2
    torch.testing.assert_close(pair_out, pair_in)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_scores_depend_only_on_relative_position(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    dh = 32
    rope = RotaryEmbedding(dh)
    q = torch.randn(1, 1, 1, dh, dtype=dtype)
    k = torch.randn(1, 1, 1, dh, dtype=dtype)

    def score(m: int, n: int) -> torch.Tensor:
        rq = rope(q, torch.tensor([m]))
        rk = rope(k, torch.tensor([n]))
        return (rq * rk).sum().double()

    tol = 1e-10 if dtype == torch.float64 else 1e-4
    for m, n in [(0, 0), (5, 2), (2, 5), (17, 17), (100, 3)]:
        base = score(m, n)
        for shift in (1, 7, 64, 1000):
            torch.testing.assert_close(score(m + shift, n + shift), base, atol=tol, rtol=tol)
    # and it does depend on the offset m - n (otherwise RoPE would encode nothing)
    assert not torch.isclose(score(5, 2), score(2, 5))


def test_batched_positions_equal_per_row_positions() -> None:
    torch.manual_seed(4)
    rope = RotaryEmbedding(8)
    x = torch.randn(3, 2, 4, 8)
    positions = torch.tensor([[0, 1, 2, 3], [2, 3, 4, 5], [10, 11, 12, 13]])  # (B, T)
    batched = rope(x, positions)
    for b in range(3):
        torch.testing.assert_close(batched[b : b + 1], rope(x[b : b + 1], positions[b]))
    shared = rope(x, positions[:1])  # (1, T) broadcasts over the batch
    torch.testing.assert_close(shared, rope(x, positions[0]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_keeps_dtype_and_is_accurate(dtype: torch.dtype) -> None:
    torch.manual_seed(5)
    x = torch.randn(1, 2, 6, 16).to(dtype)
    positions = torch.tensor([0, 1, 500, 1000, 5000, 20_000])
    out = RotaryEmbedding(16)(x, positions)
    assert out.dtype == dtype
    ref = _reference_rope(x, positions)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.double(), ref, atol=4 * eps, rtol=2 * eps)


def test_gradcheck() -> None:
    rope = RotaryEmbedding(6)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    assert torch.autograd.gradcheck(lambda t: rope(t, positions), (x,))


@pytest.mark.parametrize("head_dim", [7, 1, 0])
def test_odd_head_dim_raises(head_dim: int) -> None:
    with pytest.raises(ValueError, match=f"head_dim must be even and >= 2.*got {head_dim}"):
        RotaryEmbedding(head_dim)


def test_bad_inputs_raise_naming_values() -> None:
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match=r"head_dim=8 but x has last dim 6"):
        rope(torch.zeros(1, 1, 3, 6), torch.arange(3))
    with pytest.raises(ValueError, match=r"\(B, H, T, Dh\), got shape \(1, 3, 8\)"):
        rope(torch.zeros(1, 3, 8), torch.arange(3))
    with pytest.raises(ValueError, match=r"positions of shape \(4,\) do not match.*\(2, 1, 3, 8\)"):
        rope(torch.zeros(2, 1, 3, 8), torch.arange(4))
    with pytest.raises(ValueError, match=r"positions of shape \(3, 3\) do not match"):
        rope(torch.zeros(2, 1, 3, 8), torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"integer tensor, got dtype torch\.float32"):
        rope(torch.zeros(1, 1, 3, 8), torch.arange(3.0))

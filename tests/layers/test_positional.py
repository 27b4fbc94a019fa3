"""Tests for qkv.layers.positional against the formulas of Vaswani et al. 2017, section 3.5."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.layers import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, positional


def _reference_pe(pos: int, index: int, d_model: int, base: float = 10000.0) -> float:
    """PE(pos, index) written straight from the paper, in Python float64."""
    i = index // 2
    angle = pos / base ** (2 * i / d_model)
    return math.sin(angle) if index % 2 == 0 else math.cos(angle)


# --- sinusoidal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [8, 64, 7])
@pytest.mark.parametrize("pos", [0, 1, 5, 511, 10_000, 123_457])
def test_sinusoidal_matches_paper_formula(d_model: int, pos: int) -> None:
    pe = SinusoidalPositionalEncoding(d_model).encoding(torch.tensor([pos]))[0]
    expected = torch.tensor([_reference_pe(pos, k, d_model) for k in range(d_model)])
    assert pe.shape == (d_model,)
    assert pe.dtype == torch.float32
    # float32 rounding of values in [-1, 1]; computing the angle in float32 would miss by ~4e-3.
    torch.testing.assert_close(pe, expected.float(), atol=1e-6, rtol=0)


def test_sinusoidal_custom_base_and_any_shape() -> None:
    enc = SinusoidalPositionalEncoding(6, base=100.0)
    positions = torch.tensor([[0, 3], [17, 2000]])  # (2, 2)
    pe = enc.encoding(positions, dtype=torch.float64)
    assert pe.shape == (2, 2, 6)
    for r in range(2):
        for c in range(2):
            expected = [_reference_pe(int(positions[r, c]), k, 6, 100.0) for k in range(6)]
            torch.testing.assert_close(pe[r, c], torch.tensor(expected, dtype=torch.float64))


def test_sinusoidal_forward_adds_encoding_with_offset() -> None:
    d_model, t, offset = 16, 5, 9
    enc = SinusoidalPositionalEncoding(d_model)
    x = torch.randn(3, t, d_model)
    out = enc(x, offset=offset)
    expected = torch.tensor(
        [[_reference_pe(offset + p, k, d_model) for k in range(d_model)] for p in range(t)]
    )
    torch.testing.assert_close(out, x + expected.float(), atol=1e-6, rtol=0)


def test_sinusoidal_offset_equals_slice_of_longer_sequence() -> None:
    enc = SinusoidalPositionalEncoding(32)
    long = enc(torch.zeros(1, 40, 32))
    for offset, t in [(0, 40), (3, 10), (39, 1), (17, 23)]:
        chunk = enc(torch.zeros(1, t, 32), offset=offset)
        torch.testing.assert_close(chunk, long[:, offset : offset + t], atol=0, rtol=0)


@settings(max_examples=30, deadline=None)
@given(
    offset=st.integers(0, 5000),
    t=st.integers(1, 20),
    d_model=st.integers(1, 24),
)
def test_sinusoidal_encoding_consistent_with_forward(offset: int, t: int, d_model: int) -> None:
    enc = SinusoidalPositionalEncoding(d_model)
    out = enc(torch.zeros(2, t, d_model), offset=offset)
    pe = enc.encoding(torch.arange(offset, offset + t))
    torch.testing.assert_close(out, pe.expand(2, t, d_model), atol=0, rtol=0)


@pytest.mark.parametrize("k", [1, 3, 50, 1000])
def test_sinusoidal_shift_is_a_rotation_per_frequency(k: int) -> None:
    """Section 3.5: PE(pos + k) is a linear function of PE(pos), a 2x2 rotation per frequency."""
    d_model = 16
    enc = SinusoidalPositionalEncoding(d_model)
    pos = torch.arange(0, 300, 7)
    pe = enc.encoding(pos, dtype=torch.float64)  # (P, D)
    shifted = enc.encoding(pos + k, dtype=torch.float64)  # (P, D)
    for i in range(d_model // 2):
        w = 1.0 / 10000.0 ** (2 * i / d_model)
        c, s = math.cos(w * k), math.sin(w * k)
        # sin(a + b) = sin a cos b + cos a sin b; cos(a + b) = cos a cos b - sin a sin b
        rotation = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        pair = pe[:, 2 * i : 2 * i + 2]  # (P, 2) = (sin, cos)
        torch.testing.assert_close(pair @ rotation.T, shifted[:, 2 * i : 2 * i + 2])


@pytest.mark.parametrize("d_model", [6, 7])
def test_sinusoidal_encoding_in_chunks_equals_all_at_once(monkeypatch, d_model: int) -> None:
    # Many positions are encoded in chunks (memory peaks at the result, not at four times it):
    # the same numbers, in any shape of positions.
    pe = SinusoidalPositionalEncoding(d_model)
    positions = torch.arange(-5, 45).reshape(5, 10)
    whole = pe.encoding(positions, dtype=torch.float64)
    monkeypatch.setattr(positional, "ENCODING_CHUNK", 7)
    chunked = pe.encoding(positions, dtype=torch.float64)
    assert chunked.shape == (5, 10, d_model)
    assert torch.equal(chunked, whole)


def test_sinusoidal_keeps_input_dtype() -> None:
    enc = SinusoidalPositionalEncoding(8)
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        x = torch.zeros(1, 4, 8, dtype=dtype)
        out = enc(x, offset=100)
        assert out.dtype == dtype
        ref = enc.encoding(torch.arange(100, 104), dtype=torch.float64)
        torch.testing.assert_close(out.double(), ref[None], atol=1e-2, rtol=0)


def test_sinusoidal_wrong_width_names_both() -> None:
    enc = SinusoidalPositionalEncoding(16)
    with pytest.raises(ValueError, match=r"d_model=16.*last dim 12"):
        enc(torch.zeros(2, 3, 12))


def test_sinusoidal_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="d_model must be >= 1, got 0"):
        SinusoidalPositionalEncoding(0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.5"):
        SinusoidalPositionalEncoding(8, dropout=1.5)
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8), offset=-1)
    with pytest.raises(ValueError, match=r"integer tensor, got dtype torch\.float32"):
        SinusoidalPositionalEncoding(8).encoding(torch.tensor([1.0]))


def test_sinusoidal_has_no_parameters_and_no_state() -> None:
    enc = SinusoidalPositionalEncoding(8)
    assert list(enc.parameters()) == []
    assert enc.state_dict() == {}


# --- learned ------------------------------------------------------------------------------------


def test_learned_adds_table_rows() -> None:
    emb = LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    out = emb(x, offset=5)
    torch.testing.assert_close(out, x + emb.embedding.weight[5:8].detach())
    torch.testing.assert_close(emb.encoding(torch.tensor([5, 6, 7])), emb.embedding.weight[5:8])


def test_learned_too_long_names_the_numbers() -> None:
    emb = LearnedPositionalEmbedding(512, 8)
    with pytest.raises(ValueError) as err:
        emb(torch.zeros(1, 600, 8))
    message = str(err.value)
    assert "sequence of length 600" in message
    assert "positions 0..599" in message
    assert "max_len=512" in message
    assert "LearnedPositionalEmbedding" in message

    with pytest.raises(ValueError, match=r"length 3 \(positions 510..512\) exceeds max_len=512"):
        emb(torch.zeros(1, 3, 8), offset=510)
    emb(torch.zeros(1, 2, 8), offset=510)  # the last two positions exist

    with pytest.raises(ValueError, match=r"positions range over 3..512, outside 0..511"):
        emb.encoding(torch.tensor([3, 512]))


def test_learned_wrong_width_names_both() -> None:
    emb = LearnedPositionalEmbedding(16, 8)
    with pytest.raises(ValueError, match=r"d_model=8.*last dim 5"):
        emb(torch.zeros(1, 3, 5))


@pytest.mark.parametrize(
    "module",
    [
        lambda: SinusoidalPositionalEncoding(16, dropout=0.5),
        lambda: LearnedPositionalEmbedding(32, 16, dropout=0.5),
    ],
    ids=["sinusoidal", "learned"],
)
def test_dropout_only_in_training(module) -> None:
    torch.manual_seed(0)
    layer = module()
    x = torch.randn(4, 10, 16)
    layer.eval()
    first, second = layer(x, offset=2), layer(x, offset=2)
    assert torch.equal(first, second)
    layer.train()
    train_out = layer(x, offset=2)
    assert not torch.equal(train_out, first)  # dropout does act in training mode
    assert (train_out == 0).any()


def test_learned_gradients_reach_only_used_rows() -> None:
    emb = LearnedPositionalEmbedding(20, 6)
    x = torch.randn(3, 4, 6, requires_grad=True)
    emb(x, offset=7).square().sum().backward()
    grad = emb.embedding.weight.grad
    assert grad is not None
    assert grad[7:11].abs().sum(dim=-1).gt(0).all()
    assert torch.count_nonzero(grad[:7]) == 0
    assert torch.count_nonzero(grad[11:]) == 0
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_learned_initial_scale_and_arguments() -> None:
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(1000, 64)
    assert emb.embedding.weight.std().item() == pytest.approx(0.02, rel=0.05)
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        LearnedPositionalEmbedding(0, 8)
    with pytest.raises(ValueError, match="d_model must be >= 1, got -2"):
        LearnedPositionalEmbedding(8, -2)

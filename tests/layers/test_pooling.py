"""Pooling: float64 references, zero weight on padding, Lin et al.'s penalty, padding invariance."""

from __future__ import annotations

import pytest
import torch

from qkv.layers.pooling import (
    AttentionPooling,
    FixedPooling,
    StructuredSelfAttention,
    build_pooling,
    cls_pool,
    max_pool,
    mean_pool,
    structured_penalty,
)

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = [5, 2, 1, 4]  # unsorted; row 2 has one real token
B, T, D = len(LENGTHS), 5, 6


def _batch(seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, T, D, generator=gen, dtype=dtype)
    keep = torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]  # (B, T)
    return hidden, keep


def _garbage(hidden: torch.Tensor, keep: torch.Tensor, value: float) -> torch.Tensor:
    return hidden.masked_fill(~keep[..., None], value)


def _attention_reference(module: AttentionPooling, hidden: torch.Tensor, n: int):
    """``v^T tanh(W q + U h_t + b)`` over the first ``n`` states of one row, in float64."""
    score = module.score
    w, u = score.query_proj.weight.double(), score.key_proj.weight.double()
    b, v = score.key_proj.bias.double(), score.v.weight[0].double()
    h = hidden[:n].double()  # (n, D)
    energies = torch.tanh(w @ module.query.double() + h @ u.T + b) @ v  # (n,)
    weights = energies.softmax(dim=0)
    return weights @ h, weights


def _structured_reference(module: StructuredSelfAttention, hidden: torch.Tensor, n: int):
    """``A = softmax(W_s2 tanh(W_s1 H^T))``, ``M = A H``, ``||A A^T - I||_F^2`` for one row."""
    h = hidden[:n].double()  # (n, D)
    a = (module.w_s2.weight.double() @ torch.tanh(module.w_s1.weight.double() @ h.T)).softmax(-1)
    gram = a @ a.T  # (r, r)
    penalty = torch.linalg.matrix_norm(gram - torch.eye(module.hops, dtype=a.dtype)) ** 2
    return (a @ h).flatten(), a, penalty


def test_mean_and_max_equal_hand_computed_values():
    hidden = torch.tensor([[[1.0, -2.0], [3.0, 4.0], [100.0, -100.0]]])  # (1, 3, 2)
    keep = torch.tensor([[True, True, False]])
    torch.testing.assert_close(mean_pool(hidden, keep), torch.tensor([[2.0, 1.0]]))
    torch.testing.assert_close(max_pool(hidden, keep), torch.tensor([[3.0, 4.0]]))
    torch.testing.assert_close(cls_pool(hidden), torch.tensor([[1.0, -2.0]]))


def test_mean_and_max_equal_float64_references_over_real_tokens():
    hidden, keep = _batch()
    mean, best = mean_pool(hidden, keep), max_pool(hidden, keep)
    for row, n in enumerate(LENGTHS):
        real = hidden[row, :n].double()
        torch.testing.assert_close(mean[row].double(), real.mean(0), atol=1e-6, rtol=0)
        torch.testing.assert_close(best[row].double(), real.max(0).values, atol=0, rtol=0)


def test_max_pool_sends_the_gradient_to_real_tokens_only():
    hidden, keep = _batch()
    hidden = _garbage(hidden, keep, -1e6).requires_grad_()  # padding below every real value
    max_pool(hidden, keep).sum().backward()
    assert (hidden.grad[~keep] == 0).all()
    # Each feature's gradient goes to one real token: D ones per row.
    torch.testing.assert_close(hidden.grad.sum(dim=(1, 2)), torch.full((B,), float(D)))


def test_rows_without_a_real_token_pool_to_zeros():
    hidden, keep = _batch()
    keep[1] = False
    assert (mean_pool(hidden, keep)[1] == 0).all()
    assert (max_pool(hidden, keep)[1] == 0).all()
    out = AttentionPooling(D, 4)(hidden, keep)
    assert (out.vector[1] == 0).all() and (out.weights[1] == 0).all()
    out = StructuredSelfAttention(D, 4, hops=3)(hidden, keep)
    assert (out.vector[1] == 0).all() and (out.weights[1] == 0).all()


def test_attention_pooling_equals_the_float64_reference():
    torch.manual_seed(0)
    module = AttentionPooling(D, 7)
    hidden, keep = _batch()
    out = module(hidden, keep)
    assert out.vector.shape == (B, D) and out.weights.shape == (B, T) and out.penalty is None
    for row, n in enumerate(LENGTHS):
        vector, weights = _attention_reference(module, hidden[row], n)
        torch.testing.assert_close(out.vector[row].double(), vector, atol=1e-6, rtol=0)
        torch.testing.assert_close(out.weights[row, :n].double(), weights, atol=1e-6, rtol=0)
        assert (out.weights[row, n:] == 0).all()  # exactly zero, not merely small


@pytest.mark.parametrize("hops", [1, 3])
def test_structured_self_attention_equals_the_float64_reference(hops: int):
    torch.manual_seed(0)
    module = StructuredSelfAttention(D, 5, hops=hops)
    hidden, keep = _batch()
    out = module(hidden, keep)
    assert out.vector.shape == (B, hops * D) and out.weights.shape == (B, hops, T)
    penalties = []
    for row, n in enumerate(LENGTHS):
        vector, weights, penalty = _structured_reference(module, hidden[row], n)
        torch.testing.assert_close(out.vector[row].double(), vector, atol=1e-6, rtol=0)
        torch.testing.assert_close(out.weights[row, :, :n].double(), weights, atol=1e-6, rtol=0)
        assert (out.weights[row, :, n:] == 0).all()
        penalties.append(penalty)
    torch.testing.assert_close(
        out.penalty.double(), torch.stack(penalties).mean(), atol=1e-5, rtol=0
    )


def test_structured_vector_is_the_hops_of_m_one_after_another():
    torch.manual_seed(0)
    module = StructuredSelfAttention(D, 5, hops=3)
    hidden, keep = _batch()
    out = module(hidden, keep)
    m = out.weights @ hidden.masked_fill(~keep[..., None], 0.0)  # (B, r, D)
    torch.testing.assert_close(out.vector.view(B, 3, D), m, atol=1e-6, rtol=0)


def test_penalty_is_zero_for_orthogonal_one_hot_attention_and_known_otherwise():
    one_hot = torch.eye(4)[[2, 0, 3]].unsqueeze(0)  # (1, r=3, T=4): three different tokens
    assert structured_penalty(one_hot).item() == 0.0
    same = torch.eye(4)[[1, 1, 1]].unsqueeze(0)  # every hop on one token: A A^T = ones(3, 3)
    assert structured_penalty(same).item() == pytest.approx(6.0)  # six off-diagonal ones
    uniform = torch.full((1, 2, 4), 0.25)  # A A^T = 1/4 everywhere: 2 (3/4)^2 + 2 (1/4)^2
    assert structured_penalty(uniform).item() == pytest.approx(1.25)
    batch = torch.cat([one_hot, same])  # averaged over the batch
    assert structured_penalty(batch).item() == pytest.approx(3.0)


@pytest.mark.parametrize("kind", ["cls", "mean", "max", "attention", "structured"])
@pytest.mark.parametrize("garbage", [1e30, -1e30, float("inf"), float("nan")])
def test_values_at_padded_positions_never_reach_the_output(kind: str, garbage: float):
    torch.manual_seed(0)
    module = build_pooling(kind, D, attention_dim=5, hops=2)
    hidden, keep = _batch()
    clean = module(hidden, keep)
    dirty = module(_garbage(hidden, keep, garbage), keep)
    assert torch.equal(clean.vector, dirty.vector)
    # The attending kinds return their weights (structured self-attention its penalty too): the
    # checks below run for them, never skipped by a missing value.
    assert (clean.weights is not None) == (kind in ("attention", "structured"))
    assert (clean.penalty is not None) == (kind == "structured")
    if clean.weights is not None:
        assert torch.equal(clean.weights, dirty.weights)
        weights = dirty.weights.view(B, -1, T)  # (B, 1 or r, T)
        assert (weights.masked_select(~keep[:, None, :]) == 0).all()  # padding: zero weight
    if clean.penalty is not None:
        assert torch.equal(clean.penalty, dirty.penalty)


@pytest.mark.parametrize("kind", ["cls", "mean", "max", "attention", "structured"])
def test_a_row_alone_equals_the_same_row_in_a_padded_batch(kind: str):
    torch.manual_seed(0)
    module = build_pooling(kind, D, attention_dim=5, hops=2)
    hidden, keep = _batch()
    batched = module(hidden, keep)
    for row, n in enumerate(LENGTHS):
        alone = module(hidden[row : row + 1, :n], keep[row : row + 1, :n])
        torch.testing.assert_close(alone.vector[0], batched.vector[row], atol=1e-6, rtol=0)
        if alone.weights is not None:
            torch.testing.assert_close(
                alone.weights[0], batched.weights[row][..., :n], atol=1e-6, rtol=0
            )


@pytest.mark.parametrize("kind", ["attention", "structured"])
def test_gradients_match_finite_differences_in_float64(kind: str):
    torch.manual_seed(0)
    module = build_pooling(kind, 3, attention_dim=4, hops=2).double()
    hidden = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([[True] * 5, [True, True, False, False, False]])

    def pooled(h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = module(h, keep)
        return (out.vector,) if out.penalty is None else (out.vector, out.penalty)

    assert torch.autograd.gradcheck(pooled, (hidden,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["mean", "max", "attention", "structured"])
def test_low_precision_stays_finite_and_close_to_float64(kind: str, dtype: torch.dtype):
    torch.manual_seed(0)
    module = build_pooling(kind, D, attention_dim=5, hops=2)
    hidden, keep = _batch()
    reference = build_pooling(kind, D, attention_dim=5, hops=2)
    reference.load_state_dict(module.state_dict())
    expected = reference.double()(hidden.double(), keep).vector
    low = module.to(dtype)(_garbage(hidden, keep, 6e4).to(dtype), keep).vector  # near fp16 max
    assert low.dtype == dtype and torch.isfinite(low).all()
    # Rounding the inputs and weights alone moves the result by about one unit in the last place.
    tolerance = 8 * torch.finfo(dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(low.double(), expected, atol=tolerance, rtol=0)


def test_bad_inputs_name_the_offending_shape_or_value():
    hidden, keep = _batch()
    with pytest.raises(ValueError, match=r"keep must be a boolean \(B, T\) = \(4, 5\).*\(4, 6\)"):
        mean_pool(hidden, torch.ones(4, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"torch\.int64"):
        AttentionPooling(D, 3)(hidden, keep.long())
    with pytest.raises(ValueError, match=r"hidden must be \(B, T, D\), got shape \(4, 5\)"):
        cls_pool(hidden[..., 0])
    with pytest.raises(ValueError, match="'sum'"):
        build_pooling("sum", D)
    with pytest.raises(ValueError, match="hops=0"):
        StructuredSelfAttention(D, 4, hops=0)
    with pytest.raises(ValueError, match="'first'"):
        FixedPooling("first", D)


def test_output_dim_is_the_width_of_the_vector():
    hidden, keep = _batch()
    for kind in ("cls", "mean", "max", "attention", "structured"):
        module = build_pooling(kind, D, attention_dim=5, hops=3)
        assert module(hidden, keep).vector.size(-1) == module.output_dim

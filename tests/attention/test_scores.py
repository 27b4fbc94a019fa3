"""Score functions: hand-computed values, float64 gradcheck, bounded-memory Additive."""

import math

import pytest
import torch
from torch.autograd import gradcheck

from qkv.attention import scores
from qkv.attention.core import attend
from qkv.attention.masks import padding_mask
from qkv.attention.scores import Additive, Dot, General, Location, ScaledDot

# Three 1-d vectors with Q = K = V = [1, 2, 3] (B = 1, T = 3, D = 1), worked out on paper.
X = torch.tensor([[[1.0], [2.0], [3.0]]], dtype=torch.float64)


def _softmax_rows(rows):
    out = []
    for row in rows:
        z = sum(math.exp(e) for e in row)
        out.append([math.exp(e) / z for e in row])
    return torch.tensor([out], dtype=torch.float64)


def _check_by_hand(score, energies):
    torch.testing.assert_close(score(X, X), torch.tensor([energies], dtype=torch.float64))
    weights = _softmax_rows(energies)
    out = attend(X, X, X, score=score, need_weights=True)
    torch.testing.assert_close(out.weights, weights)
    torch.testing.assert_close(out.context, weights @ X)
    # The fused path (no weights) gives the same context.
    torch.testing.assert_close(attend(X, X, X, score=score).context, weights @ X)


def test_dot_by_hand():
    _check_by_hand(Dot(), [[1, 2, 3], [2, 4, 6], [3, 6, 9]])


def test_scaled_dot_by_hand():
    # d_k = 1, so 1/sqrt(d_k) = 1; an explicit scale of 0.5 halves every energy.
    _check_by_hand(ScaledDot(), [[1, 2, 3], [2, 4, 6], [3, 6, 9]])
    _check_by_hand(ScaledDot(scale=0.5), [[0.5, 1, 1.5], [1, 2, 3], [1.5, 3, 4.5]])


def test_scaled_dot_uses_sqrt_of_key_width():
    q, k = torch.ones(1, 1, 4), torch.ones(1, 2, 4)
    torch.testing.assert_close(ScaledDot()(q, k), torch.full((1, 1, 2), 4 / math.sqrt(4)))


def test_general_by_hand():
    score = General(1).double()
    with torch.no_grad():
        score.weight.fill_(2.0)  # q^T W k = 2 q k
    _check_by_hand(score, [[2, 4, 6], [4, 8, 12], [6, 12, 18]])


def test_additive_by_hand():
    score = Additive(1, 1, 1).double()
    with torch.no_grad():
        score.query_proj.weight.fill_(1.0)
        score.key_proj.weight.fill_(1.0)
        score.key_proj.bias.fill_(0.0)
        score.v.weight.fill_(1.0)  # v^T tanh(q + k) = tanh(q + k)
    t = math.tanh
    _check_by_hand(score, [[t(2), t(3), t(4)], [t(3), t(4), t(5)], [t(4), t(5), t(6)]])


def test_location_by_hand():
    score = Location(1, max_len=3).double()
    with torch.no_grad():
        score.proj.weight.copy_(torch.tensor([[1.0], [0.0], [-1.0]]))  # W_a h_t = [q, 0, -q]
        score.proj.bias.zero_()
    _check_by_hand(score, [[1, 0, -1], [2, 0, -2], [3, 0, -3]])


def test_location_uses_first_tk_outputs_and_rejects_longer_keys():
    score = Location(4, max_len=6)
    q = torch.randn(2, 3, 4)
    torch.testing.assert_close(score(q, torch.randn(2, 5, 4)), score.proj(q)[..., :5])
    with pytest.raises(ValueError, match=r"max_len=6.*got 7"):
        score(q, torch.randn(2, 7, 4))


def _naive_additive(score, q, k):
    hidden = torch.tanh(score.query_proj(q)[:, :, None] + score.key_proj(k)[:, None])
    return score.v(hidden).squeeze(-1)  # (B, Tq, Tk)


def test_additive_chunks_equal_the_broadcast_form(monkeypatch):
    torch.manual_seed(0)
    score = Additive(6, 5, 7).double()
    q = torch.randn(3, 11, 6, dtype=torch.float64, requires_grad=True)
    k = torch.randn(3, 9, 5, dtype=torch.float64, requires_grad=True)
    naive = _naive_additive(score, q, k)
    monkeypatch.setattr(scores, "ADDITIVE_CHUNK_ELEMENTS", 3 * 9 * 7 * 2)  # 2 queries per chunk
    chunked = score(q, k)
    torch.testing.assert_close(chunked, naive)
    params = [q, k, *score.parameters()]
    g_chunked = torch.autograd.grad(chunked.square().sum(), params)
    g_naive = torch.autograd.grad(naive.square().sum(), params)
    for a, b in zip(g_chunked, g_naive, strict=True):
        torch.testing.assert_close(a, b)


def test_additive_prepare_is_reusable():
    score = Additive(4, 6, 5)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 7, 6)
    prepared = score.prepare(k)
    torch.testing.assert_close(score.energies(q, prepared), score(q, k))
    torch.testing.assert_close(score.energies(q[:, :1], prepared), score(q[:, :1], k))
    with pytest.raises(ValueError, match="hidden_dim 5"):
        score.energies(q, k)  # raw keys instead of the prepared value


SCORES = {
    "dot": lambda: Dot(),
    "scaled": lambda: ScaledDot(),
    "general": lambda: General(3, 3),
    "additive": lambda: Additive(3, 3, 4),
    "location": lambda: Location(3, 5),
}


@pytest.mark.parametrize("name", sorted(SCORES))
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "chunked"])
def test_gradcheck_through_attend(name, need_weights, monkeypatch):
    torch.manual_seed(0)
    monkeypatch.setattr(scores, "ADDITIVE_CHUNK_ELEMENTS", 2 * 5 * 4)  # exercise recomputation
    score = SCORES[name]().double()
    q = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 2, dtype=torch.float64, requires_grad=True)
    keep = padding_mask(torch.tensor([5, 3]), 5)[:, 0]  # (B, 1, Tk)
    params = list(score.parameters())

    def fn(q, k, v, *params):
        return attend(q, k, v, score=score, keep=keep, need_weights=need_weights).context

    assert gradcheck(fn, (q, k, v, *params), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ScaledDot(scale=0.0), "positive finite"),
        (lambda: General(0, 3), "query_dim=0"),
        (lambda: Additive(3, 3, 0), "hidden_dim=0"),
        (lambda: Location(3, 0), "max_len=0"),
    ],
)
def test_bad_configuration_raises(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_width_mismatches_name_the_shapes():
    with pytest.raises(ValueError, match=r"width 4.*width 5"):
        Dot()(torch.randn(1, 2, 4), torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match=r"query width 4 and key width 4.*\(1, 3, 5\)"):
        General(4)(torch.randn(1, 2, 4), torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match=r"query width 3.*\(1, 2, 4\)"):
        Additive(3, 3, 2)(torch.randn(1, 2, 4), torch.randn(1, 3, 3))


def test_additive_gradients_with_broadcast_heads(monkeypatch):
    # Queries shared across heads (H = 1) against per-head keys: gradients must sum back.
    torch.manual_seed(0)
    monkeypatch.setattr(scores, "ADDITIVE_CHUNK_ELEMENTS", 2 * 3 * 4 * 5)
    score = Additive(3, 3, 5).double()
    q = torch.randn(2, 1, 4, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 4, 3, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda q, k: score(q, k), (q, k), eps=1e-6, atol=1e-5)


def test_additive_never_materialises_the_full_pre_activation(monkeypatch):
    # Record the largest tensor any operation produces in forward and backward: it must be one
    # chunk, never the (B, Tq, Tk, A) tensor of the broadcast form (deterministic, unlike RSS).
    from torch.utils._python_dispatch import TorchDispatchMode

    class LargestOutput(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    LargestOutput.largest = max(LargestOutput.largest, t.numel())
            return out

    b, t, a = 4, 64, 32
    monkeypatch.setattr(scores, "ADDITIVE_CHUNK_ELEMENTS", b * t * a * 4)  # 4 query rows a chunk
    score = Additive(16, 16, a)
    q = torch.randn(b, t, 16, requires_grad=True)
    k = torch.randn(b, t, 16, requires_grad=True)
    with LargestOutput():
        score(q, k).sum().backward()
    assert LargestOutput.largest <= b * t * a * 4  # one chunk
    assert LargestOutput.largest < b * t * t * a // 8  # the broadcast form would be 8x more

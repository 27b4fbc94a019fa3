"""The attention demonstration behind ``qkv demo``: every score function learns an alignment.

A small, fully reproducible experiment. A "source sentence" is ``S`` random token vectors; each of
``S`` queries is a noisy copy of one source vector, in a shuffled order, plus its target position
encoded as a one-hot tail. The right alignment (which source each query should attend to) is known,
so the alignment matrix of each score function can be checked by eye and by accuracy:

* ``Dot`` and ``ScaledDot`` have no parameters and align by content at once;
* ``General`` (bilinear) and ``Additive`` (Bahdanau) learn to from a few hundred gradient steps;
* ``Location`` ignores content (it sees only the query), so it can learn only where queries tend to
  point, which is the lesson of Luong et al. 2015's location-based score.

It also times the fused multi-head path against the naive textbook implementation (the full
``(B, H, T, S)`` energy matrix, ``masked_fill``, softmax), forward and backward, on one
configuration.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.attention import Additive, Dot, General, Location, MultiHeadAttention, ScaledDot, attend
from qkv.attention.masks import padding_mask


@dataclass(frozen=True)
class ScoreAlignment:
    """One score function's result: its alignment on a held-out example and its accuracy."""

    name: str
    weights: Tensor  # (T, S) alignment of the displayed example
    target: Tensor  # (T,) the source position each query should attend to
    accuracy: float  # fraction of held-out queries whose weight peaks on the right source
    train_steps: int


@dataclass(frozen=True)
class SpeedComparison:
    """Forward+backward seconds of qkv's multi-head attention and the naive version."""

    length: int
    heads: int
    head_dim: int
    qkv_seconds: float
    naive_seconds: float


@dataclass(frozen=True)
class DemoReport:
    alignments: list[ScoreAlignment]
    speed: SpeedComparison | None


def _batch(
    n: int, s: int, d: int, noise: float, g: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """Keys ``(n, S, D + S)`` and queries ``(n, S, D + S)``; query t copies key ``target[t]``."""
    content = torch.randn(n, s, d, generator=g)  # (n, S, D)
    target = torch.stack([torch.randperm(s, generator=g) for _ in range(n)])  # (n, T=S)
    picked = content.gather(1, target.unsqueeze(-1).expand(-1, -1, d))  # (n, T, D)
    queries = picked + noise * torch.randn(picked.shape, generator=g)
    position = torch.eye(s).expand(n, s, s)  # one-hot position tail, (n, T, S)
    keys = torch.cat([content, position], dim=-1)  # (n, S, D + S)
    return keys, torch.cat([queries, position], dim=-1), target


def score_alignments(
    *, source_len: int = 6, dim: int = 16, steps: int = 300, seed: int = 0
) -> list[ScoreAlignment]:
    """Train the parameterised scores on the alignment task and evaluate all five."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    width = dim + source_len
    scores = {
        "Dot": Dot(),
        "ScaledDot": ScaledDot(),
        "General": General(width, width),
        "Additive": Additive(width, width, 32),
        "Location": Location(width, source_len),
    }
    test_keys, test_queries, test_target = _batch(256, source_len, dim, 0.3, g)
    results = []
    for name, score in scores.items():
        params = list(score.parameters())
        n_steps = steps if params else 0
        if params:
            optimiser = torch.optim.Adam(params, lr=1e-2)
            for _ in range(n_steps):
                keys, queries, target = _batch(64, source_len, dim, 0.3, g)
                weights = attend(queries, keys, keys, score=score, need_weights=True).weights
                assert weights is not None  # need_weights=True
                loss = F.nll_loss(weights.clamp_min(1e-9).log().flatten(0, 1), target.flatten())
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            weights = attend(
                test_queries, test_keys, test_keys, score=score, need_weights=True
            ).weights
        assert weights is not None  # need_weights=True
        accuracy = (weights.argmax(-1) == test_target).float().mean().item()
        results.append(ScoreAlignment(name, weights[0], test_target[0], accuracy, n_steps))
    return results


def _naive_attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor) -> Tensor:
    """The textbook version this library replaces (kept only as the demo's point of comparison).

    Its cost is the whole ``(B, H, T, S)`` matrix; the fill is the dtype's minimum rather than the
    textbook's ``-1e10`` so that even this baseline cannot overflow in low precision.
    """
    energies = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    energies = energies.masked_fill(~keep, torch.finfo(energies.dtype).min)
    return energies.softmax(dim=-1) @ v  # (B, H, T, Dh)


def compare_speed(
    *, length: int = 1024, heads: int = 8, head_dim: int = 64, reps: int = 3
) -> SpeedComparison:
    """Median forward+backward seconds of ``MultiHeadAttention`` and the naive version, B = 1."""
    torch.manual_seed(0)
    d_model = heads * head_dim
    mha = MultiHeadAttention(d_model, heads)
    x = torch.randn(1, length, d_model, requires_grad=True)
    keep = padding_mask(torch.tensor([length * 3 // 4]), length)  # (1, 1, 1, T)

    def fused() -> Tensor:
        return mha(x, keep=keep).context

    def naive() -> Tensor:
        q = mha.q_proj(x).view(1, length, heads, head_dim).transpose(1, 2)
        k, v = mha.project_kv(x)  # the same projections, then the textbook core
        context = _naive_attention(q, k, v, keep).transpose(1, 2).reshape(1, length, d_model)
        return mha.out_proj(context)

    def seconds(fn) -> float:
        times = []
        for _ in range(reps + 1):
            start = time.perf_counter()
            fn().sum().backward()
            times.append(time.perf_counter() - start)
        return sorted(times[1:])[len(times[1:]) // 2]

    return SpeedComparison(length, heads, head_dim, seconds(fused), seconds(naive))


def run_demo(*, with_speed: bool = True, seed: int = 0) -> DemoReport:
    """Everything ``qkv demo`` shows, as data; ``seed`` in ``[0, 2**64)`` (PyTorch's range)."""
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed}")
    return DemoReport(score_alignments(seed=seed), compare_speed() if with_speed else None)

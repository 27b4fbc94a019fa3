"""Pooling: one vector per sequence from token states ``hidden (B, T, D)`` and ``keep (B, T)``.

``keep`` is ``True`` at real tokens (qkv's mask convention); no pooling gives padding any weight,
and no output depends on the states at padded positions.

* :func:`cls_pool`: the state at position 0 (a ``[CLS]`` token the caller prepends; BERT, Devlin
  et al. 2019, section 3).
* :func:`mean_pool`: the mean over real tokens; :func:`max_pool`: the element-wise maximum over
  them (Conneau et al. 2017, "Supervised Learning of Universal Sentence Representations").
* :class:`AttentionPooling`: a learned query scores every token with the additive score of
  Bahdanau et al. 2015, eq. (A.1.2), ``e_t = v^T tanh(W q + U h_t)``; ``a = softmax(e)``,
  ``vector = sum_t a_t h_t``. With ``q`` learned, ``W q`` is a learned bias, so this is the word
  attention of Yang et al. 2016, "Hierarchical Attention Networks", section 2.2.
* :class:`StructuredSelfAttention`: Lin et al. 2017, "A Structured Self-attentive Sentence
  Embedding", sections 2.1-2.2:

      A = softmax(W_s2 tanh(W_s1 H^T))        (r, T): r hops, W_s1 (d_a, D), W_s2 (r, d_a)
      M = A H                                 (r, D), returned flattened to (r * D,)
      P = ||A A^T - I||_F^2                   the penalty, averaged over the batch

  Row ``i`` of ``W_s2`` is a learned query against the keys ``tanh(W_s1 h_t)``, so ``A`` is a
  plain dot-product attention and runs on qkv's core (:func:`qkv.attention.core.attend`).

Every pooling module returns a :class:`PoolOutput` and has an ``output_dim`` attribute;
:func:`build_pooling` makes one by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.core import attend
from qkv.attention.masks import check_keep
from qkv.attention.scores import Additive, Dot

__all__ = [
    "POOLINGS",
    "AttentionPooling",
    "FixedPooling",
    "PoolOutput",
    "StructuredSelfAttention",
    "build_pooling",
    "cls_pool",
    "max_pool",
    "mean_pool",
    "structured_penalty",
]

POOLINGS = ("cls", "mean", "max", "attention", "structured")


@dataclass(frozen=True)
class PoolOutput:
    """What a pooling module returns.

    Attributes:
        vector: ``(B, output_dim)``: ``(B, D)``, or ``(B, r * D)`` for structured self-attention.
        weights: ``(B, T)`` attention over tokens, ``(B, r, T)`` for ``r`` hops, or ``None`` for
            the parameter-free poolings. Zero at padded positions.
        penalty: scalar ``||A A^T - I||_F^2`` averaged over the batch (structured self-attention
            only), else ``None``.
    """

    vector: Tensor
    weights: Tensor | None = None
    penalty: Tensor | None = None


def _check(hidden: Tensor, keep: Tensor | None) -> None:
    if hidden.dim() != 3:
        raise ValueError(f"hidden must be (B, T, D), got shape {tuple(hidden.shape)}")
    if keep is None:
        return
    check_keep(keep, "keep")
    if keep.shape != hidden.shape[:2]:
        raise ValueError(
            f"keep must be a boolean (B, T) = {tuple(hidden.shape[:2])} tensor (True = real "
            f"token), got shape {tuple(keep.shape)} and dtype {keep.dtype}"
        )


def _zero_padding(hidden: Tensor, keep: Tensor) -> Tensor:
    """``hidden`` with padded states replaced by zeros, so that no value there (not even inf or
    NaN, which a zero weight would not cancel: 0 * inf = NaN) reaches the output."""
    return torch.where(keep.unsqueeze(-1), hidden, hidden.new_zeros(()))  # (B, T, D)


def cls_pool(hidden: Tensor) -> Tensor:
    """The state at position 0, ``(B, T, D) -> (B, D)``: the ``[CLS]`` token the caller prepends
    (for a BiLSTM, ``[h->_0; h<-_0]``, whose backward half has read the whole sequence)."""
    _check(hidden, None)
    return hidden[:, 0]  # (B, D)


def mean_pool(hidden: Tensor, keep: Tensor) -> Tensor:
    """Mean over the real tokens, ``(B, T, D) -> (B, D)``; a row with none gives zeros."""
    _check(hidden, keep)
    total = _zero_padding(hidden, keep).sum(dim=1)  # (B, D)
    count = keep.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
    return total / count.to(total.dtype)


def max_pool(hidden: Tensor, keep: Tensor) -> Tensor:
    """Element-wise maximum over the real tokens, ``(B, T, D) -> (B, D)``; a row with none gives
    zeros.

    Padded positions are overwritten with a copy of the row's first real state, which can never
    exceed the maximum over real states: no fill constant is needed, and the gradient reaches real
    states only.
    """
    _check(hidden, keep)
    first = keep.int().argmax(dim=1)  # (B,): index of the first real token (0 if none)
    first_state = hidden.gather(1, first[:, None, None].expand(-1, 1, hidden.size(-1)))
    filled = torch.where(keep.unsqueeze(-1), hidden, first_state)  # (B, T, D)
    best = filled.max(dim=1).values  # (B, D)
    return torch.where(keep.any(dim=1, keepdim=True), best, best.new_zeros(()))


class FixedPooling(nn.Module):
    """A parameter-free pooling (``"cls"``, ``"mean"`` or ``"max"``) as a module.

    Shape:
        ``hidden (B, T, D)``, ``keep (B, T)`` -> :class:`PoolOutput` with ``vector (B, D)`` and no
        weights.
    """

    def __init__(self, method: str, d_model: int) -> None:
        super().__init__()
        if method not in FIXED_POOLINGS:
            raise ValueError(f"FixedPooling method must be 'cls', 'mean' or 'max', got {method!r}")
        self.method, self.output_dim = method, d_model
        self._pool = FIXED_POOLINGS[method]

    def forward(self, hidden: Tensor, keep: Tensor) -> PoolOutput:
        return PoolOutput(self._pool(hidden, keep))

    def extra_repr(self) -> str:
        return f"method={self.method!r}"


def _cls_pool(hidden: Tensor, keep: Tensor) -> Tensor:
    _check(hidden, keep)
    return cls_pool(hidden)


# The parameter-free poolings by name: (hidden (B, T, D), keep (B, T)) -> (B, D).
FIXED_POOLINGS = {"cls": _cls_pool, "mean": mean_pool, "max": max_pool}


class AttentionPooling(nn.Module):
    """One learned query attends over the tokens with an additive score.

    Args:
        d_model: width ``D`` of the token states (and of the learned query).
        attention_dim: hidden width ``A`` of the additive score.

    Shape:
        ``hidden (B, T, D)``, ``keep (B, T)`` -> ``vector (B, D)``, ``weights (B, T)``.
    """

    def __init__(self, d_model: int, attention_dim: int) -> None:
        super().__init__()
        if d_model < 1 or attention_dim < 1:
            raise ValueError(
                f"AttentionPooling needs positive sizes, got d_model={d_model}, "
                f"attention_dim={attention_dim}"
            )
        self.query = nn.Parameter(torch.randn(d_model) * d_model**-0.5)  # (D,)
        self.score = Additive(d_model, d_model, attention_dim)
        self.output_dim = d_model

    def forward(self, hidden: Tensor, keep: Tensor) -> PoolOutput:
        _check(hidden, keep)
        hidden = _zero_padding(hidden, keep)
        query = self.query.to(hidden.dtype).expand(hidden.size(0), 1, -1)  # (B, 1, D)
        out = attend(
            query, hidden, hidden, score=self.score, keep=keep[:, None, :], need_weights=True
        )  # context (B, 1, D), weights (B, 1, T)
        assert out.weights is not None  # need_weights=True
        return PoolOutput(out.context.squeeze(1), out.weights.squeeze(1))


class StructuredSelfAttention(nn.Module):
    """Lin et al. 2017: ``r`` hops of attention and the penalty ``||A A^T - I||_F^2``.

    The ``(B, r, D)`` matrix ``M`` is flattened hop by hop into ``vector (B, r * D)`` (hop 0's
    ``D`` features first), the input of the paper's classifier (section 2.1). Neither projection
    has a bias, as in the paper.

    Args:
        d_model: width ``D`` of the token states (``2u`` for the paper's BiLSTM).
        attention_dim: ``d_a``, the hidden width of the scoring MLP (350 in the paper).
        hops: ``r``, the number of attention rows (30 in the paper).

    Shape:
        ``hidden (B, T, D)``, ``keep (B, T)`` -> ``vector (B, r * D)``, ``weights (B, r, T)``,
        ``penalty ()``. A sequence with no real token gets zero rows and a penalty of ``r``.
    """

    def __init__(self, d_model: int, attention_dim: int, hops: int) -> None:
        super().__init__()
        if min(d_model, attention_dim, hops) < 1:
            raise ValueError(
                f"StructuredSelfAttention needs positive sizes, got d_model={d_model}, "
                f"attention_dim={attention_dim}, hops={hops}"
            )
        self.w_s1 = nn.Linear(d_model, attention_dim, bias=False)  # W_s1 (d_a, D)
        self.w_s2 = nn.Linear(attention_dim, hops, bias=False)  # W_s2 (r, d_a)
        self.score = Dot()
        self.hops = hops
        self.output_dim = hops * d_model

    def forward(self, hidden: Tensor, keep: Tensor) -> PoolOutput:
        _check(hidden, keep)
        hidden = _zero_padding(hidden, keep)
        b = hidden.size(0)
        keys = torch.tanh(self.w_s1(hidden))  # (B, T, d_a)
        queries = self.w_s2.weight.to(keys.dtype).expand(b, -1, -1)  # (B, r, d_a)
        out = attend(
            queries, keys, hidden, score=self.score, keep=keep[:, None, :], need_weights=True
        )  # context M (B, r, D), weights A (B, r, T)
        assert out.weights is not None  # need_weights=True
        return PoolOutput(out.context.flatten(1), out.weights, structured_penalty(out.weights))


def structured_penalty(weights: Tensor) -> Tensor:
    """``||A A^T - I||_F^2`` of Lin et al. 2017, section 2.2, averaged over the batch.

    Args:
        weights: ``A``, ``(B, r, T)``.

    Returns:
        A scalar, in at least float32.
    """
    a = weights.to(torch.promote_types(weights.dtype, torch.float32))
    gram = a @ a.transpose(-2, -1)  # (B, r, r)
    eye = torch.eye(a.size(1), dtype=a.dtype, device=a.device)
    return (gram - eye).pow(2).sum(dim=(-2, -1)).mean()


def build_pooling(
    name: str, d_model: int, *, attention_dim: int = 64, hops: int = 1
) -> FixedPooling | AttentionPooling | StructuredSelfAttention:
    """The pooling named ``name`` (one of :data:`POOLINGS`) over states of width ``d_model``;
    ``attention_dim`` serves ``"attention"`` and ``"structured"``, ``hops`` the latter."""
    if name in FIXED_POOLINGS:
        return FixedPooling(name, d_model)
    if name == "attention":
        return AttentionPooling(d_model, attention_dim)
    if name == "structured":
        return StructuredSelfAttention(d_model, attention_dim, hops)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {name!r}")

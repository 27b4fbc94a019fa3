"""Score functions: how much each query should attend to each key.

Every score is a small module with one signature, ``score(query, key) -> energies``:

    query: (..., Tq, Dq)      key: (..., Tk, Dk)      energies: (..., Tq, Tk)

where ``...`` is ``B`` or ``B, H``. Scores hold parameters, never per-call state. The call splits in
two steps, ``energies(query, prepare(key))``: ``prepare`` does the work that depends on the keys
alone (Bahdanau's ``U h``), so a decoder that scores the same keys at every step prepares them once
and passes the returned value back. A score that is a
(scaled) dot product of transformed inputs says so through :meth:`Score.as_dot_product`, which lets
:func:`qkv.attention.attend` hand the whole computation to the fused kernel.

References:
    Luong, Pham, Manning 2015, "Effective Approaches to Attention-based NMT", eq. (8)-(9):
        dot: h_t^T h_s; general: h_t^T W_a h_s; concat: v_a^T tanh(W_a [h_t; h_s]);
        location: a_t = softmax(W_a h_t).
    Bahdanau, Cho, Bengio 2015, eq. (A.1.2): e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j).
    Vaswani et al. 2017, eq. (1): QK^T / sqrt(d_k).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

# Upper bound on the elements of one (..., chunk, Tk, hidden) block in `Additive`: 2**22 float32
# values are 16 MiB, small next to the whole tensor, large enough to amortise the Python loop.
ADDITIVE_CHUNK_ELEMENTS = 1 << 22


class Score(nn.Module):
    """Base class: ``forward(query, key) -> energies (..., Tq, Tk)``.

    Subclasses implement :meth:`energies` and, when some work depends on the keys alone,
    :meth:`prepare`.
    """

    def prepare(self, key: Tensor) -> Tensor:
        """Key-only precomputation, ``(..., Tk, Dk) -> (..., Tk, *)``; identity by default."""
        return key

    def energies(self, query: Tensor, prepared: Tensor) -> Tensor:
        """Energies from queries and the value :meth:`prepare` returned: ``(..., Tq, Tk)``."""
        raise NotImplementedError

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        return self.energies(query, self.prepare(key))

    def as_dot_product(self, query: Tensor, key: Tensor) -> tuple[Tensor, Tensor, float] | None:
        """Return ``(q, k, scale)`` with ``energies == scale * q @ k^T``, or ``None``.

        Scores that are not dot products (additive, location) return ``None`` and are evaluated by
        the chunked path.
        """
        return None


def check_prepared(prepared_key: Tensor | None, key: Tensor) -> None:
    """Raise ``ValueError`` unless ``prepared_key`` (``score.prepare(key)`` kept by a caller) is
    ``None`` or agrees with ``key`` in every dim but the last."""
    if prepared_key is not None and prepared_key.shape[:-1] != key.shape[:-1]:
        raise ValueError(
            f"prepared_key {tuple(prepared_key.shape)} must agree with key "
            f"{tuple(key.shape)} in batch, heads and length"
        )


def _check_last_dims(query: Tensor, key: Tensor, name: str) -> None:
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"{name} score needs query and key of the same width, got query {tuple(query.shape)} "
            f"(width {query.size(-1)}) and key {tuple(key.shape)} (width {key.size(-1)})"
        )


class Dot(Score):
    """Luong "dot": ``q^T k``."""

    def energies(self, query: Tensor, key: Tensor) -> Tensor:
        _check_last_dims(query, key, "Dot")
        return query @ key.transpose(-2, -1)  # (..., Tq, Tk)

    def as_dot_product(self, query: Tensor, key: Tensor) -> tuple[Tensor, Tensor, float]:
        _check_last_dims(query, key, "Dot")
        return query, key, 1.0


class ScaledDot(Score):
    """Vaswani et al. 2017: ``q^T k / sqrt(d_k)`` (or ``scale * q^T k`` with an explicit scale)."""

    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        if scale is not None and not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"ScaledDot scale must be a positive finite number, got {scale}")
        self.scale = scale

    def _scale(self, query: Tensor) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(query.size(-1))

    def energies(self, query: Tensor, key: Tensor) -> Tensor:
        _check_last_dims(query, key, "ScaledDot")
        # Scale before the product: q.k itself may overflow float16 where the scaled value fits.
        return (query * self._scale(query)) @ key.transpose(-2, -1)  # (..., Tq, Tk)

    def as_dot_product(self, query: Tensor, key: Tensor) -> tuple[Tensor, Tensor, float]:
        _check_last_dims(query, key, "ScaledDot")
        return query, key, self._scale(query)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"


class General(Score):
    """Luong "general" (bilinear): ``q^T W k`` with ``W`` of shape ``(Dq, Dk)``."""

    def __init__(self, query_dim: int, key_dim: int | None = None) -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        if query_dim <= 0 or key_dim <= 0:
            raise ValueError(
                f"General needs positive widths, got query_dim={query_dim}, key_dim={key_dim}"
            )
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def _project(self, query: Tensor, key: Tensor) -> Tensor:
        if query.size(-1) != self.weight.size(0) or key.size(-1) != self.weight.size(1):
            raise ValueError(
                f"General expects query width {self.weight.size(0)} and key width "
                f"{self.weight.size(1)}, got query {tuple(query.shape)} and key {tuple(key.shape)}"
            )
        return query @ self.weight  # (..., Tq, Dk)

    def energies(self, query: Tensor, key: Tensor) -> Tensor:
        return self._project(query, key) @ key.transpose(-2, -1)  # (..., Tq, Tk)

    def as_dot_product(self, query: Tensor, key: Tensor) -> tuple[Tensor, Tensor, float]:
        return self._project(query, key), key, 1.0


class Additive(Score):
    """Bahdanau "concat": ``v^T tanh(W q + U k)``.

    The ``(..., Tq, Tk, hidden)`` pre-activation is never built whole: queries are processed in
    chunks of at most :data:`ADDITIVE_CHUNK_ELEMENTS` elements, and the backward pass recomputes
    each chunk instead of storing it, so peak memory stays bounded in training too.
    :meth:`prepare` projects the keys (``U k``); decoders that score the same keys at every step
    call it once and pass the result to :meth:`energies`.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, *, bias: bool = True) -> None:
        super().__init__()
        if min(query_dim, key_dim, hidden_dim) <= 0:
            raise ValueError(
                f"Additive needs positive widths, got query_dim={query_dim}, key_dim={key_dim}, "
                f"hidden_dim={hidden_dim}"
            )
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=bias)  # U (bias: Bahdanau's b)
        self.v = nn.Linear(hidden_dim, 1, bias=False)  # v

    def prepare(self, key: Tensor) -> Tensor:
        """``U k``: ``(..., Tk, Dk) -> (..., Tk, A)``; reusable across decoder steps."""
        if key.size(-1) != self.key_proj.in_features:
            raise ValueError(
                f"Additive expects key width {self.key_proj.in_features}, "
                f"got key {tuple(key.shape)}"
            )
        return self.key_proj(key)

    def energies(self, query: Tensor, uk: Tensor) -> Tensor:
        if query.size(-1) != self.query_proj.in_features:
            raise ValueError(
                f"Additive expects query width {self.query_proj.in_features}, "
                f"got query {tuple(query.shape)}"
            )
        if uk.size(-1) != self.query_proj.out_features:
            raise ValueError(
                f"prepared keys width {uk.size(-1)} does not match hidden_dim "
                f"{self.query_proj.out_features}: pass the value Additive.prepare returned"
            )
        wq = self.query_proj(query)  # (..., Tq, A)
        v = self.v.weight[0]  # (A,)
        tk, hidden = uk.size(-2), wq.size(-1)
        lead = math.prod(torch.broadcast_shapes(wq.shape[:-2], uk.shape[:-2]))
        chunk = max(1, ADDITIVE_CHUNK_ELEMENTS // max(1, lead * tk * hidden))
        return _AdditiveEnergies.apply(wq, uk, v, chunk)  # (..., Tq, Tk)


def _tanh_sum(wq: Tensor, uk: Tensor, out: Tensor) -> Tensor:
    """``tanh(wq_i + uk_j)`` for a chunk of queries, written into ``out``.

    ``wq (..., c, A)``, ``uk (..., Tk, A)`` -> ``out (..., c, Tk, A)``. One buffer is reused for
    every chunk: allocating and freeing a fresh block per chunk fragments the C heap until the
    process holds gigabytes it no longer uses.
    """
    out = out[..., : wq.size(-2), :, :]
    torch.add(wq.unsqueeze(-2), uk.unsqueeze(-3), out=out)
    return out.tanh_()


class _AdditiveEnergies(torch.autograd.Function):
    """``e_ij = v^T tanh(wq_i + uk_j)`` in query chunks, recomputing each chunk in backward.

    Nothing of size ``(..., Tq, Tk, A)`` is kept between forward and backward: with
    ``t = tanh(wq_i + uk_j)`` and ``g = dL/de_ij``, the backward pass rebuilds ``t`` one chunk at
    a time and uses ``d pre = g v (1 - t^2)``, ``dwq_i = sum_j d pre``, ``duk_j = sum_i d pre``,
    ``dv = sum_ij g t``.
    """

    @staticmethod
    def forward(ctx, wq: Tensor, uk: Tensor, v: Tensor, chunk: int) -> Tensor:
        ctx.save_for_backward(wq, uk, v)
        ctx.chunk = chunk
        lead = torch.broadcast_shapes(wq.shape[:-2], uk.shape[:-2])
        tq, tk = wq.size(-2), uk.size(-2)
        buffer = wq.new_empty(*lead, min(chunk, tq), tk, wq.size(-1))  # (..., c, Tk, A)
        energies = wq.new_empty(*lead, tq, tk)  # (..., Tq, Tk)
        for start in range(0, tq, chunk):
            hidden = _tanh_sum(wq[..., start : start + chunk, :], uk, buffer)
            energies[..., start : start + hidden.size(-3), :] = hidden @ v
        return energies

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None]:
        wq, uk, v = ctx.saved_tensors
        lead = torch.broadcast_shapes(wq.shape[:-2], uk.shape[:-2])
        tq, tk = wq.size(-2), uk.size(-2)
        buffer = wq.new_empty(*lead, min(ctx.chunk, tq), tk, wq.size(-1))  # (..., c, Tk, A)
        scratch = torch.empty_like(buffer)
        grad_wq = wq.new_empty(*lead, tq, wq.size(-1))  # (..., Tq, A)
        grad_uk = uk.new_zeros(*lead, tk, uk.size(-1))  # (..., Tk, A)
        grad_v = torch.zeros_like(v)
        for start in range(0, tq, ctx.chunk):
            hidden = _tanh_sum(wq[..., start : start + ctx.chunk, :], uk, buffer)
            rows = slice(start, start + hidden.size(-3))
            g = grad[..., rows, :].unsqueeze(-1)  # (..., c, Tk, 1)
            pre = scratch[..., : hidden.size(-3), :, :]
            torch.mul(hidden, g, out=pre)
            grad_v += pre.flatten(0, -2).sum(0)  # sum_ij g t
            torch.mul(hidden, hidden, out=pre)
            pre.neg_().add_(1).mul_(g).mul_(v)  # g v (1 - t^2)
            grad_wq[..., rows, :] = pre.sum(dim=-2)
            grad_uk += pre.sum(dim=-3)
        return (
            _sum_to(grad_wq, wq.shape) if ctx.needs_input_grad[0] else None,
            _sum_to(grad_uk, uk.shape) if ctx.needs_input_grad[1] else None,
            grad_v if ctx.needs_input_grad[2] else None,
            None,
        )


def _sum_to(tensor: Tensor, shape: torch.Size) -> Tensor:
    """Sum a broadcast gradient back to ``shape``."""
    while tensor.dim() > len(shape):
        tensor = tensor.sum(0)
    for dim, size in enumerate(shape):
        if size == 1 and tensor.size(dim) != 1:
            tensor = tensor.sum(dim, keepdim=True)
    return tensor


class Location(Score):
    """Luong location-based: ``energies = W_a q``, independent of the keys' content.

    The projection has one output per source position up to ``max_len``; a key sequence of
    ``Tk <= max_len`` uses the first ``Tk`` outputs. Longer key sequences are an error.
    """

    def __init__(self, query_dim: int, max_len: int) -> None:
        super().__init__()
        if query_dim <= 0 or max_len <= 0:
            raise ValueError(
                f"Location needs positive sizes, got query_dim={query_dim}, max_len={max_len}"
            )
        self.max_len = max_len
        self.proj = nn.Linear(query_dim, max_len)

    def energies(self, query: Tensor, key: Tensor) -> Tensor:
        if query.size(-1) != self.proj.in_features:
            raise ValueError(
                f"Location expects query width {self.proj.in_features}, "
                f"got query {tuple(query.shape)}"
            )
        tk = key.size(-2)
        if tk > self.max_len:
            raise ValueError(
                f"Location score was built for at most max_len={self.max_len} keys, got {tk}"
            )
        energies = self.proj(query)[..., :tk]  # (..., Tq, Tk)
        return energies.expand(*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), -1, -1)

"""Absolute positional encodings added to token embeddings.

* :class:`SinusoidalPositionalEncoding`: Vaswani et al. 2017, "Attention Is All You Need",
  section 3.5: ``PE(pos, 2i) = sin(pos / base^(2i / D))`` and
  ``PE(pos, 2i + 1) = cos(pos / base^(2i / D))``, with ``base = 10000``.
* :class:`LearnedPositionalEmbedding`: a trained table of one vector per position (Gehring et al.
  2017, "Convolutional Sequence to Sequence Learning", section 3.1; also BERT and GPT-2).

Both add the encoding to ``x`` and apply dropout (the paper's ``P_drop`` on "the sums of the
embeddings and the positional encodings"). Neither scales ``x`` by ``sqrt(D)``: the paper's
``sqrt(d_model)`` multiplies the *token embedding*, so it belongs to the embedding layer.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["LearnedPositionalEmbedding", "SinusoidalPositionalEncoding"]

# Positions encoded at once by SinusoidalPositionalEncoding.encoding; more are done in chunks.
ENCODING_CHUNK = 16384


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal encoding of Vaswani et al. 2017, section 3.5, for sequences of any length.

    Nothing is precomputed and there is no maximum length: the encoding of the positions a call
    needs is computed on the fly (``T * D`` sines and cosines, negligible next to attention). The
    angles ``pos / base^(2i / D)`` are computed in float64 (float32 on MPS, which lacks float64), so
    positions far beyond any training length stay accurate (in float32 the angle of position
    100000 is off by about 0.004 radians); the result is cast to the input's dtype.

    Even indices hold sines and odd indices cosines, as in the paper. An odd ``d_model`` is
    supported: the last index is the sine of frequency ``i = (D - 1) / 2`` with no cosine partner.

    Args:
        d_model: model width ``D`` (>= 1).
        dropout: dropout probability applied to ``x + PE`` (only in training mode).
        base: the wavelength base, ``10000`` in the paper.

    Shape:
        - ``x``: ``(B, T, D)`` (any leading dims: ``(..., T, D)``).
        - output: same shape and dtype as ``x``.
    """

    def __init__(self, d_model: int, *, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got {d_model}")
        if not base > 0.0:
            raise ValueError(f"base must be > 0, got {base}")
        _check_dropout(dropout)
        self.d_model = d_model
        self.base = float(base)
        self.dropout = nn.Dropout(dropout)

    def encoding(self, positions: Tensor, *, dtype: torch.dtype = torch.float32) -> Tensor:
        """The encoding of integer ``positions`` of any shape.

        Args:
            positions: integer tensor of any shape ``(...)``; negative positions are allowed (the
                formula is defined for them) though models use ``0, 1, 2, ...``.
            dtype: floating-point dtype of the result.

        Returns:
            ``(..., D)`` tensor on ``positions.device``.
        """
        if positions.dtype.is_floating_point or positions.dtype.is_complex:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        work = torch.float32 if positions.device.type == "mps" else torch.float64
        half = (self.d_model + 1) // 2  # number of frequencies; ceil(D / 2) for odd D
        two_i = torch.arange(0, 2 * half, 2, device=positions.device, dtype=work)  # (D/2,)
        inv_freq = torch.exp(two_i * (-math.log(self.base) / self.d_model))  # base^(-2i/D)
        if positions.numel() <= ENCODING_CHUNK:
            return self._encode(positions, inv_freq, work, dtype)
        # Many positions: the float64 work (four times the result's size) is done in chunks,
        # so memory peaks at the result itself.
        flat = positions.reshape(-1)  # (N,)
        out = torch.empty(flat.numel(), self.d_model, dtype=dtype, device=positions.device)
        for start in range(0, flat.numel(), ENCODING_CHUNK):
            part = flat[start : start + ENCODING_CHUNK]
            out[start : start + ENCODING_CHUNK] = self._encode(part, inv_freq, work, dtype)
        return out.reshape(*positions.shape, self.d_model)  # (..., D)

    def _encode(
        self, positions: Tensor, inv_freq: Tensor, work: torch.dtype, dtype: torch.dtype
    ) -> Tensor:
        angles = positions.to(work)[..., None] * inv_freq  # (..., D/2)
        # Interleave: (..., D/2, 2) -> (..., 2 * D/2) puts sin at 2i and cos at 2i + 1.
        pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., 2 * D/2)
        return pe[..., : self.d_model].to(dtype)  # (..., D): drops the last cosine for odd D

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + PE[offset : offset + T])``.

        Args:
            x: ``(B, T, D)`` embeddings (already scaled by ``sqrt(D)`` if the model wants that).
            offset: absolute position of ``x[:, 0]`` (e.g. the number of cached tokens).

        Returns:
            ``(B, T, D)`` in ``x.dtype``.
        """
        t = _check_input(x, self.d_model, offset, type(self).__name__)
        positions = torch.arange(offset, offset + t, device=x.device)  # (T,)
        return self.dropout(x + self.encoding(positions, dtype=x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base}"


class LearnedPositionalEmbedding(nn.Module):
    """A learned vector per absolute position, added to ``x`` (Gehring et al. 2017, BERT, GPT-2).

    The table is an :class:`torch.nn.Embedding` of ``max_len`` rows, initialised from
    ``N(0, 0.02^2)`` as in GPT-2 and BERT (the ``N(0, 1)`` default of ``nn.Embedding`` would swamp
    token embeddings of the usual scale). Positions past ``max_len`` have no vector: asking for
    them raises ``ValueError`` rather than silently wrapping or clamping.

    Args:
        max_len: number of positions ``0 .. max_len - 1`` with a vector (>= 1).
        d_model: model width ``D`` (>= 1).
        dropout: dropout probability applied to ``x + P`` (only in training mode).

    Shape:
        - ``x``: ``(B, T, D)`` (any leading dims: ``(..., T, D)``), with ``offset + T <= max_len``.
        - output: same shape and dtype as ``x``.
    """

    def __init__(self, max_len: int, d_model: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got {d_model}")
        _check_dropout(dropout)
        self.max_len = max_len
        self.d_model = d_model
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def encoding(self, positions: Tensor) -> Tensor:
        """The learned vectors of integer ``positions`` of any shape.

        Args:
            positions: integer tensor ``(...)`` with values in ``[0, max_len)``.

        Returns:
            ``(..., D)`` in the table's dtype.
        """
        if positions.dtype.is_floating_point or positions.dtype.is_complex:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        # The range check reads values back; under torch.compile it would break the graph.
        if positions.numel() and not torch.compiler.is_compiling():
            low, high = int(positions.min()), int(positions.max())
            if low < 0 or high >= self.max_len:
                raise ValueError(
                    f"positions range over {low}..{high}, outside 0..{self.max_len - 1} "
                    f"(max_len={self.max_len}) of {type(self).__name__}"
                )
        return self.embedding(positions)  # (..., D)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + P[offset : offset + T])``.

        Args:
            x: ``(B, T, D)`` embeddings.
            offset: absolute position of ``x[:, 0]`` (e.g. the number of cached tokens).

        Returns:
            ``(B, T, D)`` in ``x.dtype``.

        Raises:
            ValueError: if ``offset + T > max_len``, naming the length, positions and ``max_len``.
        """
        t = _check_input(x, self.d_model, offset, type(self).__name__)
        if offset + t > self.max_len:
            raise ValueError(
                f"sequence of length {t} (positions {offset}..{offset + t - 1}) exceeds "
                f"max_len={self.max_len} of {type(self).__name__}"
            )
        # A slice of the table equals looking up arange(offset, offset + T), without the gather.
        table = self.embedding.weight[offset : offset + t]  # (T, D)
        return self.dropout(x + table.to(x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def _check_dropout(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {p}")


def _check_input(x: Tensor, d_model: int, offset: int, owner: str) -> int:
    """Validate ``x`` of shape ``(..., T, D)`` and ``offset``; return ``T``."""
    if x.dim() < 2:
        raise ValueError(f"{owner} expects x of shape (B, T, D), got shape {tuple(x.shape)}")
    if x.size(-1) != d_model:
        raise ValueError(
            f"{owner} has d_model={d_model} but x has last dim {x.size(-1)} "
            f"(shape {tuple(x.shape)}); expected (B, T, {d_model})"
        )
    if not x.dtype.is_floating_point:
        raise ValueError(f"{owner} expects floating-point x, got dtype {x.dtype}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return x.size(-2)

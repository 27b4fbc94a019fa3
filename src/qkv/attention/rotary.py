"""Rotary position embedding (RoPE), Su et al. 2021, "RoFormer", eq. (34).

Each pair of coordinates of a query or key at position ``m`` is rotated by the angle
``m * theta_i`` with ``theta_i = base^(-2i / Dh)``, ``i = 0 .. Dh/2 - 1``:

    x'_a = x_a cos(m theta_i) - x_b sin(m theta_i)
    x'_b = x_b cos(m theta_i) + x_a sin(m theta_i)

so that ``<R(q, m), R(k, n)>`` depends on ``q``, ``k`` and ``m - n`` only (eq. (16)).

Layout: "rotate half" (GPT-NeoX, Hugging Face Llama), where coordinate ``i`` pairs with
coordinate ``i + Dh/2`` (``a = i``, ``b = i + Dh/2``), not the paper's adjacent pairs
``(2i, 2i + 1)``. The two layouts differ by a fixed permutation of the head dim; weights trained
with one need that permutation applied to the query/key projections to run with the other.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["RotaryEmbedding"]


class RotaryEmbedding(nn.Module):
    """Rotate queries or keys by their positions (RoFormer eq. (34), rotate-half layout).

    Apply it to queries and keys after the head split and before the dot product; values are not
    rotated. The module holds no parameters and no state: the angles are recomputed from
    ``positions`` on each call (``T * Dh/2`` products, negligible next to attention), so any
    position works, and cached decoding just passes the absolute positions of the new tokens.

    The angles and the rotation are computed in float32 (float64 when ``x`` is float64) and the
    result is cast back to ``x.dtype``, so float16/bfloat16 inputs do not lose the angle of large
    positions.

    Args:
        head_dim: ``Dh``, the width of one head; must be even.
        base: the wavelength base, ``10000`` in the paper.

    Shape:
        - ``x``: ``(B, H, T, Dh)``.
        - ``positions``: integer ``(T,)`` (shared by the batch) or ``(B, T)`` (per sequence, e.g.
          with left padding); ``B`` may also be 1 to broadcast.
        - output: ``(B, H, T, Dh)`` in ``x.dtype``.
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim < 2 or head_dim % 2:
            raise ValueError(
                f"head_dim must be even and >= 2 (rotations act on pairs), got {head_dim}"
            )
        if not base > 0.0:
            raise ValueError(f"base must be > 0, got {base}")
        self.head_dim = head_dim
        self.base = float(base)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """Rotate ``x`` by the angles of ``positions``.

        Args:
            x: ``(B, H, T, Dh)`` queries or keys.
            positions: integer ``(T,)`` or ``(B, T)`` absolute positions.

        Returns:
            ``(B, H, T, Dh)``, the rotated ``x`` in ``x.dtype``.
        """
        self._check(x, positions)
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        half = self.head_dim // 2
        two_i = torch.arange(0, self.head_dim, 2, device=x.device, dtype=torch.float64)  # (Dh/2,)
        inv_freq = torch.exp(two_i * (-math.log(self.base) / self.head_dim)).to(work)  # theta_i
        angles = positions.to(work)[..., None] * inv_freq  # (T, Dh/2) or (B, T, Dh/2)
        angles = torch.cat((angles, angles), dim=-1)  # (..., T, Dh): coordinate i and i + Dh/2
        if positions.dim() == 2:
            angles = angles[:, None]  # (B, T, Dh) -> (B, 1, T, Dh): shared by the heads
        x_work = x.to(work)
        x_a, x_b = x_work[..., :half], x_work[..., half:]  # (B, H, T, Dh/2) each
        rotated_half = torch.cat((-x_b, x_a), dim=-1)  # (B, H, T, Dh)
        out = x_work * angles.cos() + rotated_half * angles.sin()  # (B, H, T, Dh)
        return out.to(x.dtype)

    def _check(self, x: Tensor, positions: Tensor) -> None:
        if x.dim() != 4:
            raise ValueError(
                f"RotaryEmbedding expects x of shape (B, H, T, Dh), got shape {tuple(x.shape)}"
            )
        if x.size(-1) != self.head_dim:
            raise ValueError(
                f"RotaryEmbedding has head_dim={self.head_dim} but x has last dim {x.size(-1)} "
                f"(shape {tuple(x.shape)})"
            )
        if not x.dtype.is_floating_point:
            raise ValueError(f"RotaryEmbedding expects floating-point x, got dtype {x.dtype}")
        if positions.dtype.is_floating_point or positions.dtype.is_complex:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        b, _, t, _ = x.shape
        shape = tuple(positions.shape)
        if not (shape == (t,) or (len(shape) == 2 and shape[1] == t and shape[0] in (1, b))):
            raise ValueError(
                f"positions of shape {shape} do not match x of shape {tuple(x.shape)}; "
                f"expected (T,) = ({t},) or (B, T) = ({b}, {t})"
            )

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"

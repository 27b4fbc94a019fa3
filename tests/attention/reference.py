"""An independent float64 reference for attention, written without qkv's code."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def reference_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    keep: Tensor | None = None,
    *,
    bias: Tensor | None = None,
    energies: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(scale * q k^T + bias) v in float64; rows with no allowed key are zero.

    ``energies`` replaces the scaled dot product when given (for non-dot scores).
    """
    q, k, v = query.double(), key.double(), value.double()
    if energies is None:
        scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        energies = scale * (q @ k.transpose(-2, -1))
    energies = energies.double()
    if bias is not None:
        energies = energies + bias.double()
    if keep is not None:
        energies = energies.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(energies, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # rows that were all -inf
    return weights @ v, weights

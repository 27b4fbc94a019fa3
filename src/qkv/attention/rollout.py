"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

One layer's attention says which token each token reads from that layer's input, but after
several layers every token is a mixture of all. Rollout follows the mixture through the stack.
The residual connection carries a token's own input past attention, so each layer's head-mean
weights ``W_l`` (rows sum to 1) become ``A_l = (1 - r) W_l + r I`` (``r = 1/2`` in the paper)
and the attention of the outputs of layer ``L`` to the input tokens is the product

    Ã_L = A_L A_{L-1} ... A_1                                                   (eq. 1)

whose rows again sum to 1. For a Vision Transformer the [CLS] row of ``Ã_L`` (without the
[CLS] column) is a map over the patches.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

HEAD_FUSIONS = ("mean", "max", "min")


def attention_rollout(
    weights: Sequence[Tensor], *, residual: float = 0.5, head_fusion: str = "mean"
) -> Tensor:
    """The rolled-out attention of the last layer's outputs to the first layer's inputs.

    Args:
        weights: one ``(B, H, N, N)`` (or ``(B, N, N)``) attention per layer, first layer first,
            each row a distribution (softmax weights).
        residual: ``r``, the share of the identity (the residual path) in each layer.
        head_fusion: how heads become one matrix: ``mean`` (the paper's), or ``max`` / ``min``
            (then rows are renormalised to sum to 1).

    Returns:
        ``(B, N, N)`` float32; row ``i`` is how much output ``i`` draws on each input token.
    """
    rollout: Tensor | None = None
    for mixed in residual_attention(weights, residual=residual, head_fusion=head_fusion):
        rollout = mixed if rollout is None else mixed @ rollout  # (B, N, N)
    assert rollout is not None
    return rollout


def residual_attention(
    weights: Sequence[Tensor], *, residual: float = 0.5, head_fusion: str = "mean"
) -> list[Tensor]:
    """Each layer's heads fused into one matrix with the residual path added: ``A_l`` of eq. 1.

    Shared by rollout and :func:`qkv.attention.flow.attention_flow`, which read the same graph.

    Args:
        weights: one ``(B, H, N, N)`` (or ``(B, N, N)``) attention per layer, first layer first.
        residual: ``r`` in ``A_l = (1 - r) W_l + r I``.
        head_fusion: ``mean``, or ``max`` / ``min`` (rows renormalised to sum to 1).

    Returns:
        one ``(B, N, N)`` float32 matrix per layer; its rows sum to 1 where the weights' do.
    """
    if not weights:
        raise ValueError("attention rollout and flow need the weights of at least one layer")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must be in [0, 1], got {residual}")
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(
            f"head_fusion must be one of {', '.join(HEAD_FUSIONS)}, got {head_fusion!r}"
        )
    shape = weights[0].shape
    mixed: list[Tensor] = []
    for index, layer in enumerate(weights):
        if layer.shape != shape or layer.dim() not in (3, 4) or layer.size(-1) != layer.size(-2):
            raise ValueError(
                f"layer {index} weights have shape {tuple(layer.shape)}; expected square "
                f"(B, H, N, N) or (B, N, N) weights, all of shape {tuple(shape)}"
            )
        if not layer.is_floating_point():
            raise ValueError(
                f"layer {index} weights have dtype {layer.dtype}; expected floating-point "
                "attention weights (softmax rows), e.g. a model's returned attentions"
            )
        fused = layer.float()
        if fused.dim() == 4:
            if head_fusion == "mean":
                fused = fused.mean(1)
            else:
                fused = fused.amax(1) if head_fusion == "max" else fused.amin(1)
                fused = fused / fused.sum(-1, keepdim=True).clamp_min(1e-12)
        eye = torch.eye(fused.size(-1), dtype=fused.dtype, device=fused.device)
        mixed.append((1.0 - residual) * fused + residual * eye)  # (B, N, N)
    return mixed

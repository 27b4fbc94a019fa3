"""Token-level cross-entropy with label smoothing that ignores padding.

Label smoothing (Szegedy et al. 2016; Vaswani et al. 2017, section 5.4, epsilon = 0.1) mixes the
one-hot target with the uniform distribution over the vocabulary:

    loss_t = (1 - eps) * (-log p(y_t)) + eps * mean_v(-log p(v))

Padded positions contribute nothing, and the sum is returned with the number of real tokens, so
adding padding to a batch never changes the loss (the failure of pytorch#69339).
"""

from __future__ import annotations

import torch
from torch import Tensor


def sequence_cross_entropy(
    logits: Tensor, targets: Tensor, *, pad_id: int, label_smoothing: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Summed smoothed cross-entropy over non-padding targets, and their count.

    Args:
        logits: ``(B, T, V)``.
        targets: ``(B, T)`` token ids; positions equal to ``pad_id`` are ignored.
        pad_id: the padding id.
        label_smoothing: ``eps`` in ``[0, 1)``.

    Returns:
        ``(loss_sum, n_tokens)``: float32 scalar and integer scalar tensors. Divide for the mean.
    """
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} disagree in (B, T)"
        )
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    keep = targets != pad_id  # (B, T)
    safe_targets = targets.masked_fill(~keep, 0)
    nll = -log_probs.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    if label_smoothing:
        uniform = -log_probs.mean(dim=-1)  # (B, T)
        nll = (1.0 - label_smoothing) * nll + label_smoothing * uniform
    return (nll * keep).sum(), keep.sum()

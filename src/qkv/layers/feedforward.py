"""Position-wise feed-forward network, Vaswani et al. 2017, section 3.3, eq. (2):

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

applied to every position separately and identically (two 1x1 convolutions). ``max(0, .)`` is the
paper's ReLU; GELU (Hendrycks & Gimpel 2016, as in BERT and GPT) may replace it. Dropout on the
hidden activations is not in the paper; tensor2tensor (``relu_dropout``), PyTorch's
``nn.TransformerEncoderLayer`` and the Annotated Transformer apply it, so we do too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "PositionwiseFeedForward"]

# The activations a config may name. ``gelu`` is the exact (erf) GELU, as PyTorch's Transformer
# layers use; ``gelu_tanh`` its tanh approximation, as GPT-2 uses (Hugging Face's "gelu_new").
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
}


class PositionwiseFeedForward(nn.Module):
    """``W_2 dropout(act(W_1 x + b_1)) + b_2``, eq. (2) of Vaswani et al. 2017.

    Args:
        d_model: input and output width ``D`` (512 in the paper).
        d_ff: hidden width (2048 in the paper).
        activation: ``"relu"`` (the paper), ``"gelu"`` or ``"gelu_tanh"`` (GPT-2).
        dropout: dropout on the hidden activations, active only in training mode.
        bias: biases ``b_1`` and ``b_2``.

    Shape:
        ``x``: ``(B, T, D)`` (any leading dims); output: same shape.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_model <= 0 or d_ff <= 0:
            raise ValueError(f"d_model and d_ff must be positive, got {d_model} and {d_ff}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.activation = activation
        self._act = ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)  # W_1, b_1
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # W_2, b_2

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, D) -> (B, T, D)``."""
        return self.linear2(self.dropout(self._act(self.linear1(x))))  # (B, T, d_ff) inside

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"

"""Whether a model's sizes fit in memory, checked by each config's ``__post_init__`` before
anything is allocated.

A mistyped size (``d_model: 1099511627776``, a ViT ``image_size`` of 100,000) would otherwise
reach PyTorch's allocator, which fails with a ``RuntimeError`` naming bytes rather than the key
(or, in a library such as ``tokenizers``, aborts the process). Each config counts the parameters
of its large matrices (embeddings, position tables, projections, feed-forward layers, recurrent
gates; biases and norms are left out) and calls :func:`check_parameters`: weights that alone, in
float32, would take more than this machine's physical memory are refused with an error naming
the sizes and their values. Training needs about four times as much again (gradients and two
AdamW moments), so a model that passes may still be too large to train; one that fails can
never be built.
"""

from __future__ import annotations

from collections.abc import Iterable

from qkv.hardware import describe_bytes, memory_bytes

BYTES_PER_PARAMETER = 4  # float32


def check_parameters(config: object, count: int, keys: Iterable[str]) -> None:
    """Refuse ``config`` when ``count`` float32 parameters exceed this machine's memory.

    Args:
        config: the config being validated; ``keys`` name its fields that decide ``count``
            (they and their values are listed in the error).

    Raises:
        ValueError: the weights cannot fit, naming the sizes, the count and the memory.
    """
    need, have = count * BYTES_PER_PARAMETER, memory_bytes()
    if need <= have:
        return
    sizes = ", ".join(f"{key}={getattr(config, key)!r}" for key in keys)
    raise ValueError(
        f"{type(config).__name__} sizes {sizes} ask for about {count:.3g} parameters "
        f"({describe_bytes(need)} in float32), more than this machine's memory "
        f"({describe_bytes(have)}); choose smaller sizes"
    )


def transformer_layers(count: int, width: int, ff_width: int, *, cross: bool = False) -> int:
    """The matrices of ``count`` Transformer layers: the attention projections (4 ``D x D``,
    8 with cross-attention) and the feed-forward network (2 ``D x d_ff``)."""
    attention = (8 if cross else 4) * width * width
    return count * (attention + 2 * width * ff_width)


def recurrent_layers(count: int, input_width: int, hidden: int, *, gates: int = 4) -> int:
    """The gate matrices of ``count`` stacked recurrent layers (LSTM: 4 gates, GRU: 3); the
    first reads ``input_width``, the rest ``hidden``."""
    first = gates * hidden * (input_width + hidden)
    return first + max(count - 1, 0) * gates * hidden * (2 * hidden)

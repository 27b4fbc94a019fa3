"""Attention weights from any model, with their token labels, as a :class:`~qkv.tasks.seen.Seen`
that displays itself inline in a notebook the way a qkv runner's views do (one path renders
both: :meth:`Seen.html`).

    out = hf_model(**batch, output_attentions=True)          # a model that is not qkv's
    qkv.show_attention([a[0] for a in out.attentions], tokens, title="BERT, example 0")

``weights`` is one of ``(Tq, Tk)`` (one map), ``(H, Tq, Tk)`` (one layer's heads) or a list of
per-layer ``(H, Tq, Tk)`` tensors (or NumPy arrays), each row what a query gives its keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from qkv.tasks.seen import Seen, TokenView


def _tensor(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        import numpy as np

        if not isinstance(value, np.ndarray):
            raise TypeError(
                f"{what} must be a torch.Tensor or a NumPy array, got {type(value).__name__}"
            )
        value = torch.from_numpy(value)
    if not value.is_floating_point():
        raise TypeError(f"{what} must hold floating-point weights, got dtype {value.dtype}")
    return value.detach().cpu().float()


def _layers(weights: Any) -> list[Tensor]:
    """``weights`` as per-layer ``(H, Tq, Tk)`` tensors, checked."""
    if isinstance(weights, (list, tuple)):
        if not weights:
            raise ValueError("weights is an empty list; pass at least one layer's (H, Tq, Tk)")
        layers = [_tensor(w, f"weights[{i}]") for i, w in enumerate(weights)]
        for i, layer in enumerate(layers):
            if layer.dim() != 3:
                hint = (
                    f"; for a batch, pass one example's weights[{i}][0]" if layer.dim() == 4 else ""
                )
                raise ValueError(
                    f"weights[{i}] has shape {tuple(layer.shape)}; each layer must be "
                    f"(H, Tq, Tk){hint}"
                )
    else:
        single = _tensor(weights, "weights")
        if single.dim() not in (2, 3):
            raise ValueError(
                f"weights has shape {tuple(single.shape)}; pass (Tq, Tk), (H, Tq, Tk) or a list "
                "of per-layer (H, Tq, Tk) (for a stack (L, H, Tq, Tk), list(weights); for a "
                "batch, one example's weights[0])"
            )
        layers = [single.unsqueeze(0) if single.dim() == 2 else single]  # (H, Tq, Tk)
    first = tuple(layers[0].shape)
    for i, layer in enumerate(layers):
        if tuple(layer.shape) != first:
            raise ValueError(
                f"weights[{i}] has shape {tuple(layer.shape)} but weights[0] has {first}; every "
                "layer must have the same heads and lengths"
            )
        if min(first) < 1:
            raise ValueError(f"weights has shape {first}; every size must be at least 1")
        if not torch.isfinite(layer).all():
            raise ValueError(f"layer {i} of weights holds NaN or infinite values")
        if (layer < 0).any():
            raise ValueError(
                f"layer {i} of weights holds negative values (smallest {layer.min().item():.4g}); "
                "pass attention weights (after the softmax), not scores"
            )
    return layers


def _labels(labels: Any, count: int, what: str, axis: str) -> list[str]:
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(
            f"{what} must be a list of strings (one per token), got {type(labels).__name__}"
        )
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise TypeError(f"{what}[{i}] must be a string, got {type(label).__name__}: {label!r}")
    if len(labels) != count:
        raise ValueError(
            f"{what} has {len(labels)} labels but the weights have {count} {axis} (Tq, Tk = the "
            "last two sizes)"
        )
    return list(labels)


def show_attention(
    weights: Any,
    queries: Sequence[str],
    keys: Sequence[str] | None = None,
    *,
    title: str = "attention",
) -> Seen:
    """Attention weights with their token labels, as a :class:`Seen` that a notebook shows
    inline (``seen.html()`` is the HTML).

    Args:
        weights: ``(Tq, Tk)``, ``(H, Tq, Tk)`` or a list of per-layer ``(H, Tq, Tk)`` tensors or
            NumPy arrays of floating-point weights, finite and >= 0.
        queries: the ``Tq`` query tokens (the rows).
        keys: the ``Tk`` key tokens (the columns); ``None``: self-attention, the keys are the
            queries.
        title: the view's title.

    Raises:
        TypeError: weights that are not floating-point tensors or arrays; labels that are not
            strings.
        ValueError: a shape that is none of the above, layers that differ, NaN or negative
            weights, a label count that does not match the weights (each naming the sizes).
    """
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {type(title).__name__}")
    layers = _layers(weights)
    tq, tk = layers[0].shape[1:]
    rows = _labels(queries, tq, "queries", "query rows")
    if keys is None and tq != tk:
        raise ValueError(
            f"weights are {tq} x {tk} (Tq x Tk), so keys cannot default to the queries; pass "
            f"the {tk} key labels as keys="
        )
    columns = rows if keys is None else _labels(keys, tk, "keys", "key columns")
    view = TokenView(
        "attention", title, rows, columns, layers, keys is None,
        ("key", "query"),
    )  # fmt: skip
    return Seen({"summary": title}, [view], subject="the tokens")

"""The checks a :class:`~qkv.tasks.seen.TokenView` makes of what it carries beside its weights
(its query and key vectors: the neuron view's); apart from seen.py, and from view_extras.py,
which makes the vectors and imports the views' types."""

from __future__ import annotations

from torch import Tensor

__all__ = ["check_vectors"]


def check_vectors(view_id: str, layers: list[Tensor], vectors: list[tuple[Tensor, Tensor]]) -> None:
    """Refuse query/key ``vectors`` that do not match the weights ``layers`` they explain."""
    if len(vectors) != len(layers):
        raise ValueError(
            f"{view_id!r} has {len(layers)} layers but {len(vectors)} (query, key) vector pairs"
        )
    for index, ((q, k), weights) in enumerate(zip(vectors, layers, strict=True)):
        h, tq, tk = weights.shape
        if q.dim() != 3 or k.dim() != 3 or tuple(q.shape[:2]) != (h, tq) or k.size(1) != tk:
            raise ValueError(
                f"layer {index} of {view_id!r}: query vectors {tuple(q.shape)} and key vectors "
                f"{tuple(k.shape)} do not fit weights {tuple(weights.shape)}; expected "
                f"({h}, {tq}, Dk) and (Hkv, {tk}, Dk)"
            )
        if q.size(2) != k.size(2) or h % k.size(0):
            raise ValueError(
                f"layer {index} of {view_id!r}: key vectors {tuple(k.shape)} do not serve "
                f"{h} query heads of width {q.size(2)}"
            )

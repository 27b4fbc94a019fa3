"""One attention view of a model's output as a figure fit to print: one layer, one head or the
mean of its heads, under a title that says which ("cross-attention, layer 2, head 3" or
"..., layer 2, mean of 4 heads").

Token views (``(H, Tq, Tk)`` per layer) are drawn by :func:`~qkv.viz.heatmap.alignment_figure`
(queries down the rows, keys along the top, a colour bar); image views by
:func:`~qkv.viz.image_attention.image_attention_figure`. The task layer's
:class:`~qkv.tasks.seen.TokenView` / :class:`~qkv.tasks.seen.ImageView` pass their tensors and
names here (``view.figure()``, ``seen.save(path)``); this module knows no task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from qkv.viz.heatmap import alignment_figure
from qkv.viz.image_attention import image_attention_figure
from qkv.viz.marks import marked_labels, word_marks
from qkv.viz.words import WORD_MARKERS, merge_word_attention, piece_groups

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# A view's groups of image maps, as ``(group name, [(label, (gh, gw) grid), ...])``.
MapGroups = Sequence[tuple[str, Sequence[tuple[str, Tensor]]]]


def pick(index: int | None, count: int, what: str, name: str) -> int:
    """``index`` (``None``: the last; negative: from the end) as an index into ``count``
    layers or heads; out of range is refused, naming the range."""
    if index is None:
        index = -1
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"{what} must be an int or None, got {index!r}")
    if not -count <= index < count:
        raise ValueError(
            f"{what} {index} is out of range: {name} has {count} {what}s; pass 0 to "
            f"{count - 1} (or -{count} to -1 from the last), or None"
        )
    return index % count


def where(layer: int, heads: int, head: int | None) -> str:
    """``"layer 2, head 3"``, or ``"layer 2, mean of 4 heads"`` for ``head=None``."""
    if head is not None:
        return f"layer {layer}, head {head}"
    return f"layer {layer}, " + (f"mean of {heads} heads" if heads > 1 else "its one head")


def token_view_figure(
    layers: Sequence[Tensor],
    keys: Sequence[str],
    queries: Sequence[str],
    *,
    name: str,
    axis_labels: tuple[str, str],
    layer: int | None = None,
    head: int | None = None,
    marks: Sequence[str] | None = None,
    words: bool = False,
) -> Figure:
    """One layer's ``(Tq, Tk)`` weights (``layers``: one ``(H, Tq, Tk)`` per layer; ``layer``
    default the last; ``head`` default the mean over heads), titled ``"{name}, {where}"``,
    ``axis_labels`` naming the keys and the queries. ``marks`` (a self-attention view's label
    of each token, :mod:`qkv.viz.marks`) follow their tokens' labels: ``"Paul [person]"``.
    ``words``: subword pieces merged into words (:func:`~qkv.viz.words.merge_word_attention`: a
    word receives the sum of its pieces' attention and gives their mean; its mark is its first
    piece's), the title saying so; tokens without subword markers are refused."""
    if not layers:
        raise ValueError(f"{name} has no attention layers to draw")
    index = pick(layer, len(layers), "layer", name)
    weights = layers[index]  # (H, Tq, Tk)
    heads = weights.size(0)
    chosen = None if head is None else pick(head, heads, "head", f"{name}, layer {index},")
    matrix = weights.mean(0) if chosen is None else weights[chosen]  # (Tq, Tk)
    title = f"{name}, {where(index, heads, chosen)}"
    if words:
        q_groups, k_groups = piece_groups(queries), piece_groups(keys)
        if len(set(q_groups)) == len(queries) and len(set(k_groups)) == len(keys):
            raise ValueError(
                f"words=True: the tokens of {name} carry no subword markers "
                f"({', '.join(WORD_MARKERS)}), so there are no pieces to merge; pass words=False"
            )
        merged = merge_word_attention(matrix, queries, keys, query_groups=q_groups,
                                      key_groups=k_groups)  # fmt: skip
        matrix, queries, keys = merged.weights, merged.query_words, merged.key_words  # (Wq, Wk)
        marks = None if marks is None else word_marks(marks, k_groups)
        title += ", pieces merged into words"
    return alignment_figure(
        matrix,
        marked_labels(keys, marks),
        marked_labels(queries, marks),
        title=title,
        axis_labels=axis_labels,
    )


def image_view_figure(
    image: Tensor,
    groups: MapGroups,
    *,
    name: str,
    layered: bool,
    summaries: int = 1,
    layer: int | None = None,
    head: int | None = None,
) -> Figure:
    """The image and its attention. ``layered`` (a ViT's: the first ``summaries`` groups its
    rollout and flow, group ``summaries + l`` layer ``l``'s head mean then each head): one map,
    of ``layer`` (default the last) and ``head`` (default the head mean). Otherwise (a
    caption's words) every map, and ``layer`` / ``head`` are refused: such a view has
    neither."""
    if layered:
        index = pick(layer, len(groups) - summaries, "layer", name)
        maps = groups[summaries + index][1]  # [("head mean", grid), ("head 0", grid), ...]
        heads = len(maps) - 1
        chosen = None if head is None else pick(head, heads, "head", f"{name}, layer {index},")
        grid = maps[0 if chosen is None else 1 + chosen][1]  # (gh, gw)
        label = where(index, heads, chosen)
        return image_attention_figure(
            image, grid[None], [label], title=f"{name}, {label}", colorbar=True
        )
    if layer is not None or head is not None:
        raise ValueError(
            f"{name} has no layers or heads to choose (one map per item); pass layer=None "
            "and head=None"
        )
    pairs = [pair for _, maps in groups for pair in maps]
    if not pairs:
        raise ValueError(f"{name} has no attention maps to draw")
    grids = torch.stack([grid for _, grid in pairs])  # (N, gh, gw)
    return image_attention_figure(
        image, grids, [label for label, _ in pairs], title=name, colorbar=True
    )

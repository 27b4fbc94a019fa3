"""Alignment heatmaps: target tokens (rows) x source tokens (columns), as in Bahdanau et al. 2015,
Figure 3, and grids of one heatmap per head for multi-head layers.

matplotlib is imported inside the functions and drawn through its object API (``Figure`` with an
Agg canvas), so importing qkv never touches matplotlib's global backend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor

from qkv.viz.figure_file import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _check(weights: Tensor, rows: Sequence[str], columns: Sequence[str]) -> None:
    if weights.shape[-2:] != (len(rows), len(columns)):
        raise ValueError(
            f"weights of shape {tuple(weights.shape)} do not match {len(rows)} target tokens x "
            f"{len(columns)} source tokens"
        )


def tick_font_size(count: int) -> float:
    """Points for the tick labels of an axis of ``count`` tokens: 9 for a short sentence,
    smaller as the axis grows, never under 5 (the figure grows 0.35 inch a token)."""
    return max(5.0, min(9.0, 9.0 - (count - 10) / 20))


def _draw(axes, weights: Tensor, rows: Sequence[str], columns: Sequence[str], title: str | None):
    image = axes.imshow(
        weights.detach().float().cpu().numpy(),
        cmap="Greys",
        vmin=0.0,
        vmax=1.0,
        aspect="auto",
        interpolation="nearest",
    )
    axes.set_xticks(
        range(len(columns)),
        labels=list(columns),
        rotation=90,
        fontsize=tick_font_size(len(columns)),
    )
    axes.set_yticks(range(len(rows)), labels=list(rows), fontsize=tick_font_size(len(rows)))
    axes.xaxis.tick_top()
    if title:
        axes.set_title(title, fontsize=9, pad=8)
    return image


def alignment_figure(
    weights: Tensor,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    *,
    title: str | None = None,
    axis_labels: tuple[str, str] = ("source", "target"),
) -> Figure:
    """The figure :func:`plot_alignment` saves: one ``(T, S)`` heatmap, target tokens down the
    rows (first at the top), source tokens along the top, and a colour bar."""
    from matplotlib.figure import Figure

    _check(weights, target_tokens, source_tokens)
    width = max(4.0, 0.35 * len(source_tokens) + 1.5)
    height = max(3.0, 0.3 * len(target_tokens) + 1.5)
    figure = Figure(figsize=(width, height))
    axes = figure.add_subplot()
    image = _draw(axes, weights, target_tokens, source_tokens, title)
    axes.set_xlabel(axis_labels[0])
    axes.set_ylabel(axis_labels[1])
    figure.colorbar(image, ax=axes, fraction=0.04, pad=0.02)
    return figure


def plot_alignment(
    weights: Tensor,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: str | Path,
    *,
    title: str | None = None,
    axis_labels: tuple[str, str] = ("source", "target"),
    format: str | None = None,
) -> Path:
    """Draw one ``(T, S)`` alignment matrix to ``path`` (.png, .svg or .pdf, or ``format``:
    :func:`~qkv.viz.figure_file.save_figure`); ``axis_labels`` names the columns and rows
    (``("key", "query")`` for self-attention)."""
    figure = alignment_figure(
        weights, source_tokens, target_tokens, title=title, axis_labels=axis_labels
    )
    return save_figure(figure, path, format=format)


def heads_figure(
    weights: Tensor,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    *,
    title: str | None = None,
) -> Figure:
    """The figure :func:`plot_heads` saves: ``(H, T, S)`` weights as a grid of heatmaps, one
    per head, each titled ``head h``, in head order."""
    from matplotlib.figure import Figure

    if weights.dim() != 3:
        raise ValueError(f"plot_heads needs (H, T, S) weights, got shape {tuple(weights.shape)}")
    _check(weights, target_tokens, source_tokens)
    heads = weights.size(0)
    cols = min(4, heads)
    grid_rows = math.ceil(heads / cols)
    cell_w = max(2.5, 0.3 * len(source_tokens) + 1.0)
    cell_h = max(2.0, 0.25 * len(target_tokens) + 1.0)
    figure = Figure(figsize=(cell_w * cols, cell_h * grid_rows + (0.5 if title else 0)))
    for h in range(heads):
        axes = figure.add_subplot(grid_rows, cols, h + 1)
        _draw(axes, weights[h], target_tokens, source_tokens, f"head {h}")
    if title:
        figure.suptitle(title)
    return figure


def plot_heads(
    weights: Tensor,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: str | Path,
    *,
    title: str | None = None,
    format: str | None = None,
) -> Path:
    """Draw ``(H, T, S)`` per-head weights as a grid of heatmaps, one per head (the file's
    format as :func:`plot_alignment`'s)."""
    figure = heads_figure(weights, source_tokens, target_tokens, title=title)
    return save_figure(figure, path, format=format)

"""Line charts of scores: BLEU by source-length bucket for several models (Bahdanau et al. 2015,
Figure 2)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from qkv.io import atomic_write


def plot_bleu_by_length(
    series: Mapping[str, Sequence[tuple[str, float]]],
    path: str | Path,
    *,
    title: str = "BLEU by source sentence length",
) -> Path:
    """``series``: model name -> ``[(bucket label, BLEU), ...]`` in bucket order."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not series:
        raise ValueError("nothing to plot: no series given")
    labels: list[str] = []
    for points in series.values():
        labels += [label for label, _ in points if label not in labels]
    figure = Figure(figsize=(6.5, 4.0))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, points in series.items():
        values = dict(points)
        xs = [i for i, label in enumerate(labels) if label in values]
        axes.plot(xs, [values[labels[i]] for i in xs], marker="o", label=name)
    axes.set_xticks(range(len(labels)), labels=labels)
    axes.set_xlabel("source sentence length (words)")
    axes.set_ylabel("BLEU")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    buffer = io.BytesIO()
    figure.savefig(
        buffer, format=Path(path).suffix.lstrip(".") or "png", bbox_inches="tight", dpi=120
    )
    atomic_write(path, lambda f: f.write(buffer.getvalue()))
    return Path(path)

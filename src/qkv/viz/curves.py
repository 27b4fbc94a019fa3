"""Line charts of scores: BLEU by source-length bucket for several models (Bahdanau et al. 2015,
Figure 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qkv.viz.figure_file import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_bleu_by_length(
    series: Mapping[str, Sequence[tuple[str, float]]],
    path: str | Path,
    *,
    title: str = "BLEU by source sentence length",
) -> Path:
    """``series``: model name -> ``[(bucket label, BLEU), ...]`` in bucket order."""
    return save_figure(bleu_by_length_figure(series, title=title), path)


def bleu_by_length_figure(
    series: Mapping[str, Sequence[tuple[str, float]]], *, title: str
) -> Figure:
    """The figure :func:`plot_bleu_by_length` saves: one line per model over the buckets."""
    from matplotlib.figure import Figure

    if not series:
        raise ValueError("nothing to plot: no series given")
    labels: list[str] = []
    for points in series.values():
        labels += [label for label, _ in points if label not in labels]
    figure = Figure(figsize=(6.5, 4.0))
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
    return figure


def plot_training_curves(metrics_csv: str | Path, path: str | Path, *, title: str = "") -> Path:
    """Training and validation loss against the step, with validation BLEU on a second axis
    when the run recorded it, from a run's ``metrics.csv``."""
    return save_figure(training_curves_figure(metrics_csv, title=title), path)


def training_curves_figure(metrics_csv: str | Path, *, title: str = "") -> Figure:
    """The figure :func:`plot_training_curves` saves: its first axes hold the losses, a twin
    axes the validation BLEU (when recorded)."""
    import csv

    from matplotlib.figure import Figure

    metrics_csv = Path(metrics_csv)
    if not metrics_csv.is_file():
        raise FileNotFoundError(f"no metrics file {metrics_csv}")
    try:
        with open(metrics_csv, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (UnicodeDecodeError, csv.Error) as error:  # not the CSV file qkv train writes
        raise ValueError(f"{metrics_csv} is not a readable CSV file: {error}") from None
    if not rows or "step" not in rows[0]:
        raise ValueError(f"{metrics_csv} holds no metrics rows with a 'step' column")

    def series(column: str) -> tuple[list[float], list[float]]:
        points = []
        for row in rows:
            try:
                points.append((float(row["step"]), float(row[column])))
            except (KeyError, TypeError, ValueError):
                continue
        return [x for x, _ in points], [y for _, y in points]

    figure = Figure(figsize=(7.0, 4.0))
    axes = figure.add_subplot()
    drawn = []
    for column, label, style in (
        ("train_loss", "train loss", "-"),
        ("valid_loss", "valid loss", "o-"),
    ):
        xs, ys = series(column)
        if xs:
            drawn += axes.plot(xs, ys, style, label=label, markersize=3)
    if not drawn:
        raise ValueError(f"{metrics_csv} has no train_loss or valid_loss values to plot")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (per token)")
    axes.grid(alpha=0.3)
    xs, ys = series("valid_bleu")
    if xs:
        right = axes.twinx()
        drawn += right.plot(xs, ys, "s--", color="tab:green", label="valid BLEU", markersize=3)
        right.set_ylabel("BLEU")
    axes.legend(drawn, [str(line.get_label()) for line in drawn], loc="center right")
    axes.set_title(title or metrics_csv.parent.name)
    return figure

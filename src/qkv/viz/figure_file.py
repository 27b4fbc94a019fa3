"""A finished figure written to a file: PNG, SVG or PDF by the file's suffix (or an explicit
``format``, for standard output, which has no suffix), whole or not at all (:mod:`qkv.io`).

Text stays text. matplotlib's default SVG turns every glyph into a path, so a label can be
neither searched, selected, edited nor read back; ``svg.fonttype: none`` writes it as a
``<text>`` element naming its font (the viewer draws it, falling back to its own sans-serif).
PDF embeds TrueType (Type 42) fonts instead of the default Type 3, which journals refuse and
editors cannot change.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from qkv.io import STREAMS, atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("png", "svg", "pdf")
DPI = 120  # PNG pixels per inch; SVG and PDF are vector


def figure_format(path: str | Path, format: str | None = None) -> str:
    """The format a figure written to ``path`` takes: ``format`` when given, else the suffix's
    (a path without one, such as ``-`` for standard output, gets PNG). An unknown suffix or
    format, or a ``format`` that contradicts the suffix, is refused, naming both."""
    suffix = "" if str(path) in STREAMS else Path(path).suffix.lower().lstrip(".")
    if format is not None and format not in FORMATS:
        raise ValueError(f"cannot write a {format!r} figure: the format must be png, svg or pdf")
    if suffix and suffix not in FORMATS:
        raise ValueError(f"cannot write {path}: the file must end in .png, .svg or .pdf")
    if format is not None and suffix and suffix != format:
        raise ValueError(
            f"cannot write {path} as {format}: its suffix says {suffix}; name a .{format} file "
            f"or leave the format out"
        )
    return format or suffix or "png"


def save_figure(figure: Figure, path: str | Path, *, format: str | None = None) -> Path:
    """Write ``figure`` to ``path`` (:func:`figure_format` picks the format), written whole or
    not at all; ``-`` writes it to standard output. Returns ``path``."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    kind = figure_format(path, format)
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):  # text as text
        figure.savefig(buffer, format=kind, bbox_inches="tight", dpi=DPI)
    atomic_write(path, lambda f: f.write(buffer.getvalue()))
    return Path(path)

"""Attention over an image, drawn on the image: a Vision Transformer's [CLS]-to-patch maps per
head and their rollout, or a caption decoder's regions for each word (Xu et al. 2015, Figure 2).

Each map is a grid ``(gh, gw)`` of weights over patches or regions; it is scaled to the image
by nearest-neighbour repetition (every pixel shows the weight of the patch it lies in, so no
weight is smeared onto a neighbour) and laid over the grey image in colour. Each panel is scaled
to its own maximum, which is printed in its title, so weak and strong heads are both readable.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.io import atomic_write
from qkv.viz.figure_file import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _grey(image: Tensor) -> Tensor:
    """``(H, W)`` or ``(C, H, W)`` (uint8 0-255 or float) as float ``(H, W)`` or ``(H, W, 3)`` in
    [0, 1]."""
    image = image.detach().cpu()
    if image.dim() == 3 and image.size(0) == 1:
        image = image[0]
    elif image.dim() == 3 and image.size(0) == 3:
        image = image.permute(1, 2, 0)
    elif image.dim() != 2:
        raise ValueError(f"image must be (H, W), (1, H, W) or (3, H, W), got {tuple(image.shape)}")
    image = image.float()
    if image.max() > 1.0 or image.min() < 0.0:
        low, high = image.min(), image.max()
        image = (image - low) / (high - low).clamp_min(1e-12)
    return image


def upsample_map(weights: Tensor, height: int, width: int) -> Tensor:
    """A ``(gh, gw)`` map repeated to ``(height, width)`` pixels (each patch or region's pixels
    carry its weight)."""
    if weights.dim() != 2:
        raise ValueError(f"an attention map must be (grid_h, grid_w), got {tuple(weights.shape)}")
    grid = weights.detach().float().cpu()[None, None]
    return F.interpolate(grid, size=(height, width), mode="nearest")[0, 0]


def image_attention_figure(
    image: Tensor,
    maps: Tensor,
    titles: Sequence[str],
    *,
    columns: int | None = None,
    title: str | None = None,
    show_image: bool = True,
    alpha: float = 0.55,
    colorbar: bool = False,
) -> Figure:
    """The figure :func:`plot_image_attention` saves: the plain image first (``show_image``),
    then one panel per map (``maps``: ``(N, gh, gw)``) laid over the image, titled with its
    title and the map's maximum, in order; ``colorbar``: a colour bar beside the map panels
    (each map is scaled to its own maximum, so it reads as a fraction of it)."""
    from matplotlib.figure import Figure

    picture = _grey(image)
    height, width = picture.shape[:2]
    if maps.dim() != 3:
        raise ValueError(f"maps must be (N, grid_h, grid_w), got {tuple(maps.shape)}")
    if len(titles) != maps.size(0):
        raise ValueError(f"{maps.size(0)} maps but {len(titles)} titles")
    panels = maps.size(0) + int(show_image)
    if panels == 0:
        raise ValueError("nothing to draw: no maps and show_image=False")
    if columns is None:
        columns = 1 if width > 2 * height else math.ceil(math.sqrt(panels))
    if columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    rows = math.ceil(panels / columns)
    panel_w = 2.2 * max(1.0, width / height) if columns == 1 else 2.2
    panel_h = 2.2 * height / width if columns == 1 else 2.2
    figure = Figure(figsize=(panel_w * columns, (panel_h + 0.4) * rows), layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    for axes in grid.flat:
        axes.axis("off")
    cmap = "gray" if picture.dim() == 2 else None
    cells = iter(grid.flat)
    overlays = []
    if show_image:
        axes = next(cells)
        axes.imshow(picture.numpy(), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
        axes.set_title("image", fontsize=9)
    for weights, name in zip(maps, titles, strict=True):
        axes = next(cells)
        overlay = upsample_map(weights, height, width)
        peak = float(overlay.max())
        axes.imshow(picture.numpy(), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
        overlays.append(axes)
        shown = axes.imshow(
            (overlay / max(peak, 1e-12)).numpy(),
            cmap="inferno",
            vmin=0.0,
            vmax=1.0,
            alpha=alpha,
            interpolation="nearest",
        )
        axes.set_title(f"{name} (max {peak:.2f})", fontsize=8)
    if colorbar and overlays:
        bar = figure.colorbar(shown, ax=overlays, shrink=0.8)
        bar.set_label("weight / the panel's maximum", fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


def plot_image_attention(
    image: Tensor,
    maps: Tensor,
    titles: Sequence[str],
    path: str | Path,
    *,
    columns: int | None = None,
    title: str | None = None,
    show_image: bool = True,
    alpha: float = 0.55,
    format: str | None = None,
) -> Path:
    """Write one panel per map (``maps``: ``(N, gh, gw)``), each over ``image``, to ``path``
    (.png, .svg or .pdf, written whole or not at all).

    Args:
        titles: one per map (e.g. ``"layer 4 head 2"``, ``"rollout"``, or a caption's word).
        columns: panels per row; default: one column for images more than twice as wide as
            high (caption strips, read top to bottom), else a near-square grid.
        show_image: put the plain image first.
        format: ``png``, ``svg`` or ``pdf`` where ``path`` has no suffix (``-``: standard
            output); default: the suffix's (:func:`~qkv.viz.figure_file.figure_format`).
    """
    figure = image_attention_figure(
        image, maps, titles, columns=columns, title=title, show_image=show_image, alpha=alpha
    )
    return save_figure(figure, path, format=format)


def save_image(image: Tensor, path: str | Path) -> Path:
    """Write ``uint8`` pixels ``(C, H, W)`` (one or three channels) as a PNG file of exactly
    those pixels (written whole or not at all), e.g. a caption strip to caption again."""
    from PIL import Image

    path = Path(path)
    if image.dtype != torch.uint8 or image.dim() != 3 or image.size(0) not in (1, 3):
        raise ValueError(
            f"image must be uint8 (1 or 3, H, W), got {image.dtype} {tuple(image.shape)}"
        )
    if path.suffix.lower() != ".png":
        raise ValueError(f"cannot write {path}: the file must end in .png")
    pixels = image.permute(1, 2, 0).cpu().numpy()  # (H, W, C)
    picture = Image.fromarray(pixels[:, :, 0] if image.size(0) == 1 else pixels)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))
    return path

"""Image files as ``uint8`` arrays: IDX files (LeCun's MNIST format) and PNG / JPEG files.

:func:`read_idx` reads an IDX file (gzip-compressed or not) into a NumPy array;
:func:`read_image` and :func:`decode_image` turn a PNG / JPEG file (or its bytes, as uploaded to
the explorer) into a ``uint8`` tensor ``(C, H, W)`` through Pillow, grey or RGB, optionally resized
(bilinear). Every error names the file. The data sets built from such files are in
:mod:`qkv.data.images.datasets`.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qkv.data.errors import DataError, DatasetUnavailable

__all__ = [
    "GREY_MODES",
    "MAX_IMAGE_SIDE",
    "decode_image",
    "parse_size",
    "pil_pixels",
    "read_idx",
    "read_image",
]

# The longest side an image may be resized to (``size=``): a 4096 x 4096 RGB image is 48 MiB,
# and Vision Transformers train at 224 to 384 pixels.
MAX_IMAGE_SIDE = 4096
# Pillow modes with one channel: an image folder holding only these is read as grey.
GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")


# --------------------------------------------------------------------- IDX files


def read_idx(path: str | Path) -> np.ndarray:
    """The ``uint8`` array of an IDX file (LeCun's MNIST format), gzip-compressed or not.

    Format: two zero bytes, a type byte (``0x08`` = unsigned byte, the only one accepted), a byte
    with the number of dimensions ``d``, ``d`` big-endian 32-bit sizes, then the values.

    Raises:
        DataError: naming the file: missing, not gzip, truncated, bad magic number, a data size
            that does not match the header.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(f"{path}: corrupt or truncated gzip data: {error}") from None
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != 0x08 or not 1 <= data[3] <= 4:
        raise DataError(
            f"{path}: not an unsigned-byte IDX file (magic number {data[:4].hex() or 'missing'}, "
            "expected 00000801 to 00000804)"
        )
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{path}: truncated header ({len(data)} bytes, expected {header})")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(shape))
    if len(data) != expected:
        raise DataError(
            f"{path}: {len(data) - header} data bytes but the header's shape {shape} needs "
            f"{expected - header} (truncated or corrupt)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape).copy()


# --------------------------------------------------------------------- PNG / JPEG (Pillow)


def parse_size(size: Any) -> tuple[int, int] | None:
    """``size`` as ``(height, width)``: one int for a square, or two, each in
    ``[1, MAX_IMAGE_SIDE]``."""
    if size is None:
        return None
    sides = [size, size] if isinstance(size, int) else size
    if not (
        isinstance(sides, list | tuple)
        and len(sides) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in sides)
    ):
        raise DataError(
            f"size must be an integer (a square) or [height, width] in pixels, got {size!r}"
        )
    height, width = sides
    if not (1 <= height <= MAX_IMAGE_SIDE and 1 <= width <= MAX_IMAGE_SIDE):
        raise DataError(
            f"size must be between 1 and {MAX_IMAGE_SIDE} pixels a side (height, width), got "
            f"{size!r}"
        )
    return height, width


def pil_pixels(image: Any, mode: str) -> np.ndarray:
    """A PIL image as ``uint8`` ``(C, H, W)``: one channel for ``"L"``, three for ``"RGB"``."""
    pixels = np.asarray(image.convert(mode), dtype=np.uint8)  # (H, W) or (H, W, 3)
    return pixels[None] if mode == "L" else pixels.transpose(2, 0, 1)


def read_image(
    path: str | Path, *, channels: int, size: int | tuple[int, int] | None = None
) -> torch.Tensor:
    """One PNG / JPEG file as a ``uint8`` tensor ``(C, H, W)`` with ``channels`` 1 (grey) or 3
    (RGB), resized (bilinear) to ``size`` ``(height, width)`` when given.

    Raises:
        DataError: naming the file: missing, unreadable, or not an image.
        DatasetUnavailable: Pillow is not installed.
    """
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such image file")
    return decode_image(file.read_bytes(), channels=channels, size=size, name=str(file))


def decode_image(
    data: bytes,
    *,
    channels: int,
    size: int | tuple[int, int] | None = None,
    name: str = "image",
    max_side: int | None = None,
) -> torch.Tensor:
    """The bytes of a PNG / JPEG file as a ``uint8`` tensor ``(C, H, W)``, as
    :func:`read_image`; ``max_side`` refuses an image wider or taller than that many pixels
    before its pixels are decoded (a small file may claim a huge image).

    Raises:
        DataError: naming ``name``: not an image, or larger than ``max_side``.
        DatasetUnavailable: Pillow is not installed.
    """
    if importlib.util.find_spec("PIL") is None:
        raise DatasetUnavailable("reading images needs Pillow: pip install pillow")
    from PIL import Image

    if channels not in (1, 3):
        raise DataError(f"channels must be 1 or 3, got {channels}")
    target = parse_size(size)
    try:
        image: Image.Image = Image.open(io.BytesIO(data))  # reads the header only
    except Image.UnidentifiedImageError:
        raise DataError(f"{name}: not a readable image (no image format Pillow knows)") from None
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise DataError(f"{name}: not a readable image: {error}") from None
    if max_side is not None and max(image.size) > max_side:
        raise DataError(
            f"{name} is {image.width}x{image.height} pixels; at most {max_side} pixels a side "
            "are accepted"
        )
    try:
        image.load()
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise DataError(f"{name}: not a readable image: {error}") from None
    if target is not None and (image.height, image.width) != target:
        image = image.resize((target[1], target[0]), Image.Resampling.BILINEAR)
    return torch.from_numpy(pil_pixels(image, "L" if channels == 1 else "RGB").copy())

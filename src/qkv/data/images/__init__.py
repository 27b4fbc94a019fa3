"""Images: the data sets (MNIST 5k, Fashion-MNIST, scikit-learn's digits, user folders), image
files (IDX, PNG, JPEG), augmentation for small images, and captioned strips of 2-4 images."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qkv.data.images.files import read_image

__all__ = ["read_image"]


def __getattr__(name: str) -> Any:
    """``read_image``, imported from :mod:`qkv.data.images.files` on first use (PEP 562), so
    that importing one module of the package does not import NumPy, torch and Pillow."""
    if name == "read_image":
        from qkv.data.images.files import read_image

        return read_image
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

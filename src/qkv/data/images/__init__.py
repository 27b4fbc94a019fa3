"""Images: the data sets (MNIST 5k, Fashion-MNIST, scikit-learn's digits, user folders), image
files (IDX, PNG, JPEG), augmentation for small images, and captioned strips of 2-4 images.

``read_image`` is imported from :mod:`qkv.data.images.files` on first use, so that importing one
module of the package does not import NumPy, torch and Pillow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qkv.lazy import lazy_exports

if TYPE_CHECKING:
    from qkv.data.images.files import read_image

__all__ = ["read_image"]
__getattr__, __dir__ = lazy_exports(globals(), {"read_image": "qkv.data.images.files"})

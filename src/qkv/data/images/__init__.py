"""Images: the data sets (MNIST 5k, Fashion-MNIST, scikit-learn's digits, user folders), image
files (IDX, PNG, JPEG), augmentation for small images, and captioned strips of 2-4 images."""

from qkv.data.images.datasets import read_image

__all__ = ["read_image"]

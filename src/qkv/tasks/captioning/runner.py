"""A trained captioner (Show, Attend and Tell, :mod:`qkv.tasks.captioning.task` trains it): caption
strips of images with each word's attention map, score held-out strips (exact match, BLEU,
alignment accuracy), and the views that ``qkv plot-attention`` and the explorer show.

Captions are written by the shared :func:`qkv.decoding.greedy_search` or, with a beam size
above 1, :func:`qkv.decoding.beam_search` (no length penalty: the most probable caption the beam
finds), the words ``<bos>`` and ``<pad>`` forbidden, up to :data:`EXTRA_WORDS` more words than the
strip has tiles. Greedy is the default, as in the validation that chose the model's weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from qkv.data.images.datasets import decode_image, load_image_dataset, read_image
from qkv.data.images.strips import CaptionVocab, Strips, collate_strips, held_out_strips
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.decoding import beam_search, greedy_search
from qkv.decoding.sizes import check_beam_size
from qkv.evaluation.captioning import CaptionScores, score_captions
from qkv.models.registry import build_config
from qkv.models.show_attend_tell.model import ShowAttendTell
from qkv.tasks.captioning.config import CaptionDataConfig
from qkv.tasks.input_checks import LengthLimits, check_lengths, text_list
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE, load_model_run_config
from qkv.tasks.sections import PredictConfig
from qkv.tasks.seen import ImageView, MapGroup, Seen
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.view_extras import NoExtras, checked_views
from qkv.training.checkpoint import CheckpointError, load_weights

EXTRA_WORDS = 2  # a strip of n tiles may be captioned with up to n + 2 words


# ---------------------------------------------------------------------- captions and scores


@dataclass(frozen=True)
class Caption:
    """One strip's caption.

    Attributes:
        words: the generated words (``<eos>`` not included).
        attention: ``(len(words), Gh, Gw_total)`` the attention map of each word's step over the
            strip's region grid.
        tile_width: ``Gw``, region columns per tile (region column ``j`` lies on tile
            ``j // tile_width``).
        region_size: pixels per region side (region ``(i, j)`` covers rows ``i * region_size``
            onwards and columns ``j * region_size`` onwards).
        tiles: how many tiles the strip has.
    """

    words: list[str]
    attention: Tensor
    tile_width: int
    region_size: int
    tiles: int


def check_beam(beam_size: int | None) -> int:
    """The beam size to caption with: 1 (greedy) when None; refused outside 1 ..
    :data:`~qkv.decoding.sizes.MAX_BEAM_SIZE`."""
    if beam_size is None:
        return 1
    return check_beam_size(beam_size)


def _caption_batch(
    model: ShowAttendTell,
    vocab: CaptionVocab,
    images: Tensor,
    keep: Tensor | None,
    tiles: int,
    beam_size: int = 1,
) -> list[Caption]:
    """Captions of ``images (B, C, H, n W)``, all of ``tiles`` real tiles (``keep``: None),
    greedy or the best of a beam; ``<bos>`` and ``<pad>`` are never targets, so never words."""
    c = model.config
    gh, gw = c.regions_per_tile
    limit, never = tiles + EXTRA_WORDS, (BOS_ID, PAD_ID)
    if beam_size == 1:
        hypotheses = greedy_search(
            model, images, keep, max_len=limit, bos_id=BOS_ID, eos_id=EOS_ID, forbidden_ids=never
        )
    else:
        beams = beam_search(model, images, keep, beam_size=beam_size, max_len=limit,
                            length_penalty=0.0, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID,
                            forbidden_ids=never)  # fmt: skip
        hypotheses = [hyps[0] for hyps in beams]
    captions = []
    for hyp in hypotheses:
        assert hyp.attention is not None  # the captioner's step returns its attention every step
        length = len(hyp.tokens)
        maps = hyp.attention[:length].float().view(length, gh, tiles * gw)  # (L, Gh, n Gw)
        words = [vocab.words[i] for i in hyp.tokens]
        captions.append(Caption(words, maps.clone(), gw, c.stride, tiles))
    return captions


def caption_strips(
    model: ShowAttendTell, vocab: CaptionVocab, strips: Strips, batch_size: int, beam_size: int = 1
) -> list[Caption]:
    """Captions of every strip (greedy, or the best of a beam), batched by tile count (so no
    caption depends on the others: its length limit is its own)."""
    device = next(model.parameters()).device
    captions: dict[int, Caption] = {}
    for n in sorted(set(strips.counts.tolist())):
        chosen = (strips.counts == n).nonzero().flatten().tolist()
        for first in range(0, len(chosen), batch_size):
            rows = chosen[first : first + batch_size]
            batch = collate_strips(strips, rows, model.config.regions_per_tile).to(device)
            made = _caption_batch(model, vocab, batch.images, batch.keep, n, beam_size)
            for row, caption in zip(rows, made, strict=True):
                captions[row] = caption
    return [captions[row] for row in range(len(strips))]


def score_strips(
    model: ShowAttendTell, vocab: CaptionVocab, strips: Strips, batch_size: int, beam_size: int = 1
) -> CaptionScores:
    """Exact match, BLEU and alignment accuracy of the model's captions of ``strips`` (greedy,
    or the best of a beam)."""
    captions = caption_strips(model, vocab, strips, batch_size, beam_size)
    references = [vocab.decode(strips.caption(i)) for i in range(len(strips))]
    word_tiles = [
        strips.word_tiles[i, : int(strips.counts[i])].tolist() for i in range(len(strips))
    ]
    return score_captions(
        [c.words for c in captions],
        references,
        [c.attention for c in captions],
        word_tiles,
        model.config.regions_per_tile[1],
    )


# ---------------------------------------------------------------------- the runner


class Captioner(NoExtras):
    """A trained captioner with its words: caption strips, score held-out strips.

    A strip's length is its tile count: the model was trained on strips of ``data.min_tiles``
    to ``data.max_tiles`` and, its LSTM having no position table, takes
    :data:`~qkv.tasks.input_checks.HARD_LIMIT_FACTOR` times ``max_tiles``. Longer strips are a
    ``ValueError`` raised before any strip is decoded; strips longer than in training warn.
    """

    def __init__(self, model: ShowAttendTell, vocab: CaptionVocab, config: RunConfig) -> None:
        self.model, self.vocab, self.config = model.eval(), vocab, config

    @classmethod
    def load(cls, model_dir: str | Path) -> Captioner:
        """The captioner saved in ``model_dir``; a missing or corrupt file is an error naming
        it."""
        directory = Path(model_dir)
        if not (directory / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
        config = load_model_run_config(directory)
        if config.task != "captioning":
            raise ValueError(f"{directory} holds a {config.task} model, not a captioning model")
        vocab = CaptionVocab.load(directory / VOCAB_FILE)
        model_config = build_config(config.family, config.model)
        if model_config.vocab_size != len(vocab):
            raise CheckpointError(
                f"{directory / CONFIG_FILE} says vocab_size {model_config.vocab_size} but "
                f"{directory / VOCAB_FILE} holds {len(vocab)} words"
            )
        model = ShowAttendTell(model_config)  # the one family of the task
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model, vocab, config)

    @property
    def tile_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one tile, as in training."""
        c = self.model.config
        return c.image_channels, c.tile_height, c.tile_width

    def _pixels(self, image: Tensor, name: str) -> Tensor:
        """One strip ``(C, H, n W)`` as float in ``[0, 1]``, checked against the tiles; errors
        call it ``name``."""
        channels, height, width = self.tile_shape
        expected = f"({channels}, {height}, n * {width}) with n >= 1"
        shape = tuple(image.shape)
        if image.dim() != 3 or shape[:2] != (channels, height) or not shape[2]:
            raise ValueError(f"{name} has shape {shape}; this captioner expects {expected}")
        if shape[2] % width:
            raise ValueError(
                f"{name} has shape {shape}: its width {shape[2]} is not a multiple of the "
                f"tile width {width}; this captioner expects {expected}"
            )
        if image.dtype == torch.uint8:
            return image.float() / 255
        if not image.dtype.is_floating_point:
            raise ValueError(f"{name} must be uint8 (0-255) or float (0-1), got {image.dtype}")
        if image.numel() and (float(image.min()) < 0 or float(image.max()) > 1):
            raise ValueError(
                f"{name} is float with values in [{float(image.min()):g}, "
                f"{float(image.max()):g}]; float images must lie in [0, 1] (or pass uint8 0-255)"
            )
        return image.float()

    def caption(
        self,
        images: Tensor | Sequence[Tensor],
        names: Sequence[str] | None = None,
        *,
        beam_size: int | None = None,
    ) -> list[Caption]:
        """Caption strips: a tensor ``(N, C, H, n W)`` or a list of ``(C, H, n_i W)`` strips,
        uint8 (0-255) or float (0-1). Strips of one width are captioned together. An image
        that does not fit is named in the error by ``names`` (a list of str: file names, say)
        or its index. Lengths are checked as the class says. ``beam_size``: the best caption
        of a beam search of that width (None or 1: greedy)."""
        beam = check_beam(beam_size)
        if not isinstance(images, Tensor | list | tuple):
            raise TypeError(
                f"images must be a tensor (N, C, H, n W) or a list of (C, H, n W) tensors, got "
                f"a {type(images).__name__}; read image files with qkv.data.images.read_image"
            )
        if isinstance(images, Tensor):
            if images.dim() != 4:
                raise ValueError(
                    f"images must be (N, C, H, W) or a list of (C, H, W), got shape "
                    f"{tuple(images.shape)}"
                )
            images = list(images)
        if names is not None:
            names = text_list(names, "names")
            if len(names) != len(images):
                raise ValueError(f"{len(names)} names for {len(images)} images")
        labels = names if names is not None else [f"image {i}" for i in range(len(images))]
        width = self.model.config.tile_width
        self._check_tiles(images, labels, width)
        strips = [self._pixels(image, label) for image, label in zip(images, labels, strict=True)]
        device = next(self.model.parameters()).device
        size = self.config.section("decode", PredictConfig).batch_size
        captions: dict[int, Caption] = {}
        for pixels in sorted({s.size(-1) for s in strips}):
            chosen = [i for i, s in enumerate(strips) if s.size(-1) == pixels]
            for first in range(0, len(chosen), size):
                rows = chosen[first : first + size]
                batch = torch.stack([strips[i] for i in rows]).to(device)  # (b, C, H, n W)
                with torch.inference_mode():
                    made = _caption_batch(
                        self.model, self.vocab, batch, None, pixels // width, beam
                    )
                for row, caption in zip(rows, made, strict=True):
                    captions[row] = caption
        return [captions[row] for row in range(len(strips))]

    def _check_tiles(self, images: Sequence[Tensor], labels: list[str], width: int) -> None:
        """Refuse a strip over the hard limit, warn about strips longer than in training
        (before any pixel is converted)."""
        for image, label in zip(images, labels, strict=True):
            if not isinstance(image, Tensor):
                raise TypeError(f"{label} is a {type(image).__name__}, not an image tensor")
        data = self.config.section("data", CaptionDataConfig)
        check_lengths(
            [image.size(-1) // width if image.dim() == 3 else 0 for image in images],
            labels,
            LengthLimits.without_table(data.max_tiles, "tiles"),
            advice="cut it into shorter strips",
            consequence="their captions may stop short or repeat words",
            item="strip",
            stacklevel=4,
        )

    def held_out(self, split: str = "test") -> Strips:
        """The fixed ``valid`` or ``test`` strips of the model's data set (those it is scored
        on)."""
        if split not in ("valid", "test"):
            raise ValueError(f"split must be valid or test, got {split!r}")
        data = self.config.section("data", CaptionDataConfig)
        count = data.valid_strips if split == "valid" else data.test_strips
        dataset = load_image_dataset(data.corpus, **data.options)
        return held_out_strips(
            dataset, split, count, min_tiles=data.min_tiles, max_tiles=data.max_tiles
        )

    def test_strips(self, count: int | None = None) -> Strips:
        """The first ``count`` of the test strips :meth:`evaluate` scores (all when None)."""
        strips = self.held_out("test")
        if count is not None and not 0 <= count <= len(strips):
            raise ValueError(f"count must be between 0 and {len(strips)} test strips, got {count}")
        return strips if count is None else strips.subset(slice(0, count))

    def evaluate(
        self, split: str = "test", *, limit: int | None = None, beam_size: int | None = None
    ) -> dict[str, Any]:
        """Exact match, BLEU, alignment accuracy and the number of strips on the fixed
        ``valid`` or ``test`` strips of the model's data set (the first ``limit`` when
        given), captioned greedily or with a beam of ``beam_size``."""
        beam = check_beam(beam_size)
        strips = self.held_out(split)
        if limit is not None:
            strips = strips.subset(slice(0, min(limit, len(strips))))
        size = self.config.section("decode", PredictConfig).batch_size
        with torch.inference_mode():
            scores = score_strips(self.model, self.vocab, strips, size, beam)
        return {"split": split, **scores.as_dict()}

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` (with ``options.beam``) as the CLI prints it and ``results.json``
        records it."""
        beam = check_beam((options or EvaluateOptions()).beam)
        result = self.evaluate(split, limit=limit, beam_size=beam)
        searched = f", beam {beam}" if beam > 1 else ""
        lines = [
            f"{result['split']}: {result['strips']:,} strips, {result['words']:,} words{searched}",
            f"exact match {result['exact_match']:.4f}  BLEU {result['bleu']:.2f}",
            f"alignment accuracy {result['alignment_accuracy']:.4f}",
        ]
        record = {**{k: v for k, v in result.items() if k != "split"}, "beam_size": beam}
        return Report(split, lines, record, complete=limit is None)

    def read_image(self, path: str | Path) -> Tensor:
        """One image file as a strip ``uint8 (C, H, W)`` in the model's channels (not resized:
        :meth:`caption` names a size that does not fit)."""
        return read_image(path, channels=self.tile_shape[0])

    def decode_upload(self, data: bytes, name: str, max_side: int) -> Tensor:
        """An uploaded image file's bytes as a strip ``uint8 (C, H, n W)``: resized to the
        tile height and a whole number of tiles when it is not already (no side over
        ``max_side`` pixels is decoded)."""
        channels, height, width = self.tile_shape
        image = decode_image(data, channels=channels, name=name, max_side=max_side)
        if image.size(1) != height or image.size(2) % width:
            tiles = max(1, round(image.size(2) * height / image.size(1) / width))
            image = decode_image(data, channels=channels, size=(height, tiles * width), name=name)
        return image

    @checked_views
    def views(self, item: Tensor, options: ViewOptions | None = None) -> Seen:
        """The caption of the strip ``item`` (greedy, or with a beam of ``options.beam``) and each
        word's attention over it."""
        options = options or ViewOptions()
        caption = self.caption([item], [options.name], beam_size=options.beam)[0]
        maps = [(f"{i}: {word}", caption.attention[i]) for i, word in enumerate(caption.words)]
        view = ImageView(
            "caption", "attention over the image, word by word", item, [MapGroup("words", maps)]
        )
        text = " ".join(caption.words)
        output = {"summary": text, "caption": text, "words": list(caption.words)}
        return Seen(output, [view], subject="the image")

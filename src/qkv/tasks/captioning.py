"""Image captioning end to end (Show, Attend and Tell, Xu et al. 2015): train a captioner on
strips of real images captioned with their class names (:mod:`qkv.data.strips`), caption new
strips with their attention maps, and score them (exact match, BLEU, alignment accuracy).

A trained model directory holds ``config.json`` (``task: captioning``, the full model
configuration), ``vocab.json`` (the caption words), ``model.safetensors`` (the best weights by
validation exact match, the REINFORCE baseline included), ``metrics.csv`` and the checkpoints.

The objective (summed over a batch, divided by its target words by the training engine):

- soft attention: cross-entropy plus ``lambda sum_i (1 - sum_t alpha_ti)^2`` over the real
  regions of each strip, ``t`` over its target steps (the doubly stochastic penalty, eq. 14;
  less its constant part ``R - 2 T``, which has no gradient, so the logged loss stays readable);
- hard attention (eq. 12): the cross-entropy of the sampled path, the REINFORCE term and an
  entropy bonus ``lambda_e sum_t H[alpha_t]``. The REINFORCE term is
  ``-lambda_r sum_t (R_t - b L_t) log p(s_t | a)`` with ``R_t`` the log-likelihood of the target
  words from step ``t`` on (the reward of eq. 12 less the words before ``t``, which choice
  ``s_t`` cannot change: the gradient keeps its expectation and loses variance), ``L_t`` how
  many words that is and ``b`` a moving average of the log-likelihood per word (a buffer of the
  model). A share ``expected_fraction`` of the strips of each batch use the expected context
  instead of a sample (section 4.1) and get no REINFORCE term. Both extra terms enter as
  surrogates of value zero, so the logged training loss is the cross-entropy.

The weights live in the model configuration (``doubly_stochastic``, ``reinforce_weight``,
``entropy_weight``, ``baseline_decay``, ``expected_fraction``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.images import ImageDataset, decode_image, load_image_dataset, read_image
from qkv.data.strips import (
    CaptionVocab,
    StripBatch,
    Strips,
    check_strips_fit,
    collate_strips,
    held_out_strips,
    strip_batches,
    train_strips,
)
from qkv.data.vocab import BOS_ID, EOS_ID, PAD_ID
from qkv.decoding import greedy_search
from qkv.evaluation.captioning import CaptionScores, score_captions
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.models.show_attend_tell import ShowAttendTell, ShowAttendTellConfig
from qkv.tasks.input_checks import LengthLimits, check_lengths, text_list
from qkv.tasks.protocol import (
    EvaluateOptions,
    ImageView,
    MapGroup,
    Report,
    Seen,
    TaskSpec,
    ViewOptions,
)
from qkv.tasks.run_config import CaptionDataConfig, PredictConfig, RunConfig
from qkv.tasks.run_dir import CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE, load_model_run_config
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.training.checkpoint import CheckpointError, load_weights
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainConfig

logger = logging.getLogger(__name__)

EXTRA_WORDS = 2  # a strip of n tiles may be captioned with up to n + 2 words


# ---------------------------------------------------------------------- the objective


def doubly_stochastic_penalty(weights: Tensor, region_keep: Tensor, step_keep: Tensor) -> Tensor:
    """``sum_i (1 - sum_t alpha_ti)^2`` per strip (eq. 14): ``weights (B, T, R)``, real regions
    ``region_keep (B, R)``, real target steps ``step_keep (B, T)`` -> ``(B,)``."""
    total = (weights * step_keep[..., None].to(weights.dtype)).sum(1)  # (B, R): sum_t alpha_ti
    return ((1 - total) ** 2 * region_keep.to(weights.dtype)).sum(-1)


def _unwrap(model: nn.Module) -> ShowAttendTell:
    """The captioner inside a DDP or ``torch.compile`` wrapper."""
    while not isinstance(model, ShowAttendTell):
        model = getattr(model, "module", None) or model._orig_mod  # type: ignore[assignment]
    return model


def caption_loss(config: ShowAttendTellConfig, label_smoothing: float = 0.0):
    """``(model, batch) -> (summed loss, target words)`` for the training engine (module doc)."""

    def loss_fn(model: nn.Module, batch: StripBatch) -> tuple[Tensor, Tensor]:
        target = batch.captions_out  # (B, T)
        steps = target != PAD_ID  # (B, T): the words and <eos>
        b = target.size(0)
        expected = None
        if config.attention == "hard":
            expected = torch.rand(b, device=target.device) < config.expected_fraction  # (B,)
        out = model(batch.images, batch.keep, batch.captions_in, expected=expected)
        logits = out.logits.float().transpose(1, 2)  # (B, V, T)
        loss = F.cross_entropy(
            logits, target, ignore_index=PAD_ID, reduction="sum", label_smoothing=label_smoothing
        )
        if config.attention == "soft":
            if config.doubly_stochastic:
                keep = batch.keep.flatten(1)  # (B, R)
                penalty = doubly_stochastic_penalty(out.weights.float(), keep, steps)
                # Each alpha_t sums to one over the real regions, so eq. 14 is sum_i S_i^2 plus
                # the constant R - 2 T: dropped, so that the logged loss shows what can change.
                penalty = penalty - (keep.sum(1) - 2 * steps.sum(1))
                loss = loss + config.doubly_stochastic * penalty.sum()
            return loss, steps.sum()
        words = -F.cross_entropy(logits, target, ignore_index=PAD_ID, reduction="none")  # (B, T)
        words = words.detach()  # log p(y_t | ...), 0 at padding
        sampled = (~expected)[:, None] & steps  # type: ignore[operator]  # (B, T)
        if torch.is_grad_enabled() and model.training:
            baseline = _unwrap(model).update_baseline(words[sampled])
        else:
            baseline = _unwrap(model).baseline
        to_go = words.flip(1).cumsum(1).flip(1)  # (B, T): log-likelihood of words t, t+1, ...
        left = steps.flip(1).cumsum(1).flip(1)  # (B, T): how many words that is
        advantage = (to_go - baseline * left) * sampled  # (B, T)
        # Surrogates whose value is zero and whose gradient is the REINFORCE estimate and the
        # entropy bonus's: the logged training loss stays the cross-entropy (and penalty).
        log_p = out.log_probs - out.log_probs.detach()
        entropy = (out.entropies - out.entropies.detach()) * steps
        loss = loss - config.reinforce_weight * (advantage * log_p).sum()
        return loss - config.entropy_weight * entropy.sum(), steps.sum()

    return loss_fn


# ---------------------------------------------------------------------- generation and scores


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


def _caption_batch(
    model: ShowAttendTell, vocab: CaptionVocab, images: Tensor, keep: Tensor | None, tiles: int
) -> list[Caption]:
    """Greedy captions of ``images (B, C, H, n W)``, all of ``tiles`` real tiles (``keep``:
    None); ``<bos>`` and ``<pad>`` are never targets, so never words."""
    c = model.config
    gh, gw = c.regions_per_tile
    hypotheses = greedy_search(
        model,
        images,
        keep,
        max_len=tiles + EXTRA_WORDS,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        forbidden_ids=(BOS_ID, PAD_ID),
    )
    captions = []
    for hyp in hypotheses:
        length = len(hyp.tokens)
        maps = hyp.attention[:length].float().view(length, gh, tiles * gw)  # (L, Gh, n Gw)
        words = [vocab.words[i] for i in hyp.tokens]
        captions.append(Caption(words, maps.clone(), gw, c.stride, tiles))
    return captions


def caption_strips(
    model: ShowAttendTell, vocab: CaptionVocab, strips: Strips, batch_size: int
) -> list[Caption]:
    """Greedy captions of every strip, batched by tile count (so no caption depends on the
    others: its length limit is its own)."""
    device = next(model.parameters()).device
    captions: list[Caption | None] = [None] * len(strips)
    for n in sorted(set(strips.counts.tolist())):
        chosen = (strips.counts == n).nonzero().flatten().tolist()
        for first in range(0, len(chosen), batch_size):
            rows = chosen[first : first + batch_size]
            batch = collate_strips(strips, rows, model.config.regions_per_tile).to(device)
            for row, caption in zip(
                rows, _caption_batch(model, vocab, batch.images, batch.keep, n), strict=True
            ):
                captions[row] = caption
    return captions  # type: ignore[return-value]


def score_strips(
    model: ShowAttendTell, vocab: CaptionVocab, strips: Strips, batch_size: int
) -> CaptionScores:
    """Exact match, BLEU and alignment accuracy of the model's greedy captions of ``strips``."""
    captions = caption_strips(model, vocab, strips, batch_size)
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


# ---------------------------------------------------------------------- training


def model_values(model: dict[str, Any], vocab_size: int, image_shape: Sequence[int]) -> dict:
    """The model section with its ``preset`` expanded, the vocabulary size and the tile shape
    of the data set."""
    channels, height, width = image_shape
    return {
        **with_preset("show_attend_tell", model),
        "vocab_size": vocab_size,
        "image_channels": channels,
        "tile_height": height,
        "tile_width": width,
    }


def _dataset(data: CaptionDataConfig) -> ImageDataset:
    return load_image_dataset(data.corpus, **data.options)


def train_captioner(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> Trained:
    """Train ``config``'s captioner; the best weights (by validation exact match) go to
    ``config.out_dir``. Arguments as :func:`qkv.tasks.translation.train_translation`."""
    run = TrainingRun(config, task="captioning", resume=resume, overwrite=overwrite,
                      distributed=distributed, progress=progress,
                      handle_signals=handle_signals)  # fmt: skip
    data = config.section("data", CaptionDataConfig)
    dataset = _dataset(data)
    for split in ("train", "valid", "test"):  # strips are drawn whole: refuse before any write
        count = getattr(data, f"{split}_strips")
        check_strips_fit(count, data.max_tiles, dataset.image_shape, split)
    # Every rank makes the words from the classes; a resumed run must find the same ones.
    vocab = CaptionVocab.from_classes(dataset.classes)
    if resume and CaptionVocab.load(run.out / VOCAB_FILE) != vocab:
        raise CheckpointError(
            f"{run.out / VOCAB_FILE} does not match the classes of data set {data.corpus!r}"
        )
    values = model_values(config.model, len(vocab), dataset.image_shape)
    model_config: ShowAttendTellConfig = build_config(config.family, values)
    model: ShowAttendTell = build_model(config.family, model_config)  # type: ignore[assignment]
    run.save(model_config, write=lambda out: vocab.save(out / VOCAB_FILE))
    tiles = dict(min_tiles=data.min_tiles, max_tiles=data.max_tiles)
    valid = held_out_strips(dataset, "valid", data.valid_strips, **tiles)
    regions = model_config.regions_per_tile
    batch_size = config.section("decode", PredictConfig).batch_size

    def evaluate() -> dict[str, float]:
        total, words = 0.0, 0
        for batch in strip_batches(valid, batch_size, regions):
            batch = batch.to(next(model.parameters()).device)
            logits = model(batch.images, batch.keep, batch.captions_in).logits.float()
            total += float(
                F.cross_entropy(
                    logits.transpose(1, 2), batch.captions_out, ignore_index=PAD_ID, reduction="sum"
                )
            )
            words += int((batch.captions_out != PAD_ID).sum())
        scores = score_strips(model, vocab, valid, batch_size)
        return {
            "valid_loss": total / words,
            "valid_exact_match": scores.exact_match,
            "valid_bleu": scores.bleu,
            "valid_alignment_accuracy": scores.alignment_accuracy,
        }

    def batches(epoch: int, start: int):
        strips = train_strips(
            dataset,
            data.train_strips,
            **tiles,
            seed=config.train.seed,
            epoch=epoch,
            max_shift=data.max_shift,
        )
        return strip_batches(strips, data.batch_size, regions, start=start)

    return run.train(
        model,
        loss_fn=caption_loss(model_config, config.train.label_smoothing),
        batches=batches,
        evaluate=evaluate,
        metric="valid_exact_match",
        higher_is_better=True,
        count_tokens=lambda batch: int((batch.captions_out != PAD_ID).sum()),
    )


# ---------------------------------------------------------------------- a trained captioner


class Captioner:
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
        model = build_model(config.family, model_config)
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model, vocab, config)  # type: ignore[arg-type]

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
        self, images: Tensor | Sequence[Tensor], names: Sequence[str] | None = None
    ) -> list[Caption]:
        """Caption strips: a tensor ``(N, C, H, n W)`` or a list of ``(C, H, n_i W)`` strips,
        uint8 (0-255) or float (0-1). Strips of one width are captioned together. An image
        that does not fit is named in the error by ``names`` (a list of str: file names, say)
        or its index. Lengths are checked as the class says."""
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
        size = self.config.decode.batch_size  # type: ignore[union-attr]
        captions: list[Caption | None] = [None] * len(strips)
        for pixels in sorted({s.size(-1) for s in strips}):
            chosen = [i for i, s in enumerate(strips) if s.size(-1) == pixels]
            for first in range(0, len(chosen), size):
                rows = chosen[first : first + size]
                batch = torch.stack([strips[i] for i in rows]).to(device)  # (b, C, H, n W)
                with torch.inference_mode():
                    made = _caption_batch(self.model, self.vocab, batch, None, pixels // width)
                for row, caption in zip(rows, made, strict=True):
                    captions[row] = caption
        return captions  # type: ignore[return-value]

    def _check_tiles(self, images: Sequence[Tensor], labels: list[str], width: int) -> None:
        """Refuse a strip over the hard limit, warn about strips longer than in training
        (before any pixel is converted)."""
        for image, label in zip(images, labels, strict=True):
            if not isinstance(image, Tensor):
                raise TypeError(f"{label} is a {type(image).__name__}, not an image tensor")
        data: CaptionDataConfig = self.config.data  # type: ignore[assignment]
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
        data: CaptionDataConfig = self.config.data  # type: ignore[assignment]
        count = data.valid_strips if split == "valid" else data.test_strips
        return held_out_strips(
            _dataset(data), split, count, min_tiles=data.min_tiles, max_tiles=data.max_tiles
        )

    def test_strips(self, count: int | None = None) -> Strips:
        """The first ``count`` of the test strips :meth:`evaluate` scores (all when None)."""
        strips = self.held_out("test")
        if count is not None and not 0 <= count <= len(strips):
            raise ValueError(f"count must be between 0 and {len(strips)} test strips, got {count}")
        return strips if count is None else strips.subset(slice(0, count))

    def evaluate(self, split: str = "test", *, limit: int | None = None) -> dict[str, Any]:
        """Exact match, BLEU, alignment accuracy and the number of strips on the fixed
        ``valid`` or ``test`` strips of the model's data set (the first ``limit`` when
        given)."""
        strips = self.held_out(split)
        if limit is not None:
            strips = strips.subset(slice(0, min(limit, len(strips))))
        size = self.config.decode.batch_size  # type: ignore[union-attr]
        with torch.inference_mode():
            scores = score_strips(self.model, self.vocab, strips, size)
        return {"split": split, **scores.as_dict()}

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        result = self.evaluate(split, limit=limit)
        lines = [
            f"{result['split']}: {result['strips']:,} strips, {result['words']:,} words",
            f"exact match {result['exact_match']:.4f}  BLEU {result['bleu']:.2f}",
            f"alignment accuracy {result['alignment_accuracy']:.4f}",
        ]
        record = {k: v for k, v in result.items() if k != "split"}
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

    def views(self, item: Tensor, options: ViewOptions | None = None) -> Seen:
        """The caption of the strip ``item`` and each word's attention over it."""
        name = (options or ViewOptions()).name
        caption = self.caption([item], [name])[0]
        maps = [(f"{i}: {word}", caption.attention[i]) for i, word in enumerate(caption.words)]
        view = ImageView(
            "caption", "attention over the image, word by word", item, [MapGroup("words", maps)]
        )
        text = " ".join(caption.words)
        output = {"summary": text, "caption": text, "words": list(caption.words)}
        return Seen(output, [view], subject="the image")


TASK = TaskSpec(
    name="captioning",
    label="captioner",
    input="image",
    families=("show_attend_tell",),
    sections={"data": CaptionDataConfig, "train": TrainConfig, "decode": PredictConfig},
    train=train_captioner,
    load=Captioner.load,
    model_keys=frozenset({"preset"}),
    splits=("valid", "test"),
    train_settings=frozenset({"label_smoothing"}),
)

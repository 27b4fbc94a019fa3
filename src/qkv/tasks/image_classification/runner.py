"""A trained Vision Transformer as a runner: classify images, show what it looks at ([CLS]
maps per layer and head, the attention rollout), and score it on a split of its data set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from qkv.attention.flow import MAX_FLOW_TOKENS, attention_flow, flow_fits
from qkv.attention.rollout import attention_rollout
from qkv.data.images.datasets import ImageDataset, decode_image, load_image_dataset, read_image
from qkv.models.registry import build_config, build_model
from qkv.models.vit import ViT
from qkv.tasks.classification.runner import ClassificationEvaluation, Prediction
from qkv.tasks.image_classification.config import ImageDataConfig
from qkv.tasks.input_checks import LengthLimits, check_lengths, path_list
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    LABELS_FILE,
    WEIGHTS_FILE,
    check_split,
    load_model_run_config,
)
from qkv.tasks.sections import PredictConfig
from qkv.tasks.seen import ImageView, MapGroup, Seen
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.view_extras import checked_views
from qkv.training.checkpoint import CheckpointError, load_weights, read_json


def to_model_input(images: Tensor) -> Tensor:
    """``uint8`` pixels ``(B, C, H, W)`` as the model's float input in [-1, 1]."""
    if images.dtype != torch.uint8:
        raise ValueError(f"images must be uint8 pixels 0-255, got {images.dtype}")
    return images.float().div_(127.5).sub_(1.0)


@dataclass(frozen=True)
class ImageAttention:
    """What a Vision Transformer looks at in one image.

    Attributes:
        cls_maps: ``(L, H, gh, gw)``: each layer's and head's attention from [CLS] to every
            patch (each ``(gh, gw)`` sums to 1 minus the weight [CLS] puts on itself).
        rollout: ``(gh, gw)``: the [CLS] row of the attention rollout over all layers
            (:func:`qkv.attention.rollout.attention_rollout`), renormalised over the patches.
        prediction: the image's class and the probability of each class.
        flow: ``(gh, gw)``: the [CLS] row of the attention flow (one output's row,
            :func:`qkv.attention.flow.attention_flow` with ``rows=[0]``), renormalised over the
            patches; ``None`` when not asked for, or over flow's limit
            (:func:`~qkv.attention.flow.flow_fits`).
    """

    cls_maps: Tensor
    rollout: Tensor
    prediction: Prediction
    flow: Tensor | None = None


class ImageClassifier:
    """A trained Vision Transformer with its class names.

    Its inputs' length is their patch count: the model was trained at ``image_size`` (its
    position table's grid) and interpolates the table for other sizes, so it takes
    :data:`~qkv.tasks.input_checks.HARD_LIMIT_FACTOR` times the trained patch count. Larger
    images are a ``ValueError`` raised before any pixel is converted; images of more patches
    than in training warn (:meth:`read_images` resizes files to the training size).
    """

    def __init__(self, model: ViT, labels: Sequence[str], config: RunConfig) -> None:
        self.model, self.config = model.eval(), config
        self.labels: tuple[str, ...] = tuple(labels)

    @classmethod
    def load(cls, model_dir: str | Path) -> ImageClassifier:
        """The model in ``model_dir``; errors name the file at fault."""
        directory = Path(model_dir)
        if not (directory / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
        config = load_model_run_config(directory)
        if config.task != "image_classification":
            raise ValueError(f"{directory} holds a {config.task} model, not an image classifier")
        labels = read_json(directory / LABELS_FILE)
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise CheckpointError(f"{directory / LABELS_FILE} must hold a list of class names")
        model = build_model(config.family, build_config(config.family, config.model))
        assert isinstance(model, ViT)  # vit is the task's one family (checked in the config)
        if model.config.num_labels != len(labels):
            raise CheckpointError(
                f"{directory / LABELS_FILE} names {len(labels)} classes but the model has "
                f"{model.config.num_labels}"
            )
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model, labels, config)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of the images the model was trained on."""
        c = self.model.config
        return c.num_channels, c.image_size, c.image_size

    def read_images(self, paths: Sequence[str | Path]) -> Tensor:
        """Image files as ``uint8`` ``(N, C, H, W)``, converted to the model's channels and
        resized to its training size; ``paths`` is a list (one bare path is a ``TypeError``)."""
        paths = path_list(paths)
        channels, height, width = self.image_shape
        if not paths:
            return torch.empty(0, channels, height, width, dtype=torch.uint8)
        return torch.stack([read_image(p, channels=channels, size=(height, width)) for p in paths])

    def read_image(self, path: str | Path) -> Tensor:
        """One image file as the model's input ``uint8 (C, H, W)`` (as :meth:`read_images`)."""
        return self.read_images([path])[0]

    def _check(self, images: Tensor) -> None:
        channels, height, width = self.image_shape
        if not isinstance(images, Tensor):
            raise TypeError(
                f"images must be a uint8 tensor (N, {channels}, H, W), got a "
                f"{type(images).__name__}; read image files with read_images(paths)"
            )
        if images.dtype != torch.uint8 or images.dim() != 4 or images.size(1) != channels:
            raise ValueError(
                f"images must be uint8 (N, {channels}, H, W), got {images.dtype} "
                f"{tuple(images.shape)}"
            )
        patch = self.model.config.patch_size
        if images.size(2) % patch or images.size(3) % patch:
            raise ValueError(
                f"image size {images.size(2)}x{images.size(3)} is not a multiple of the "
                f"{patch}-pixel patches (the model was trained at {height}x{width})"
            )
        check_lengths(
            [(images.size(2) // patch) * (images.size(3) // patch)],
            [""],
            LengthLimits.without_table(self.model.config.num_patches, "patches"),
            advice=f"resize it to the {height}x{width} pixels the model was trained at "
            "(read_images does)",
            consequence=f"its {images.size(2)}x{images.size(3)} pixels are not the "
            f"{height}x{width} it was trained at, so its position embeddings are interpolated",
            single=True,
            item="image",
            stacklevel=5,
        )

    def logits(self, images: Tensor) -> Tensor:
        """``(N, K)`` float32 logits of ``uint8`` images ``(N, C, H, W)``."""
        self._check(images)
        size = self.config.section("decode", PredictConfig).batch_size
        out = torch.empty(images.size(0), len(self.labels))
        with torch.inference_mode():
            for begin in range(0, images.size(0), size):
                batch = to_model_input(images[begin : begin + size])
                out[begin : begin + size] = self.model(batch).logits.float()
        return out

    def predict(self, images: Tensor) -> list[Prediction]:
        """The class of each ``uint8`` image ``(N, C, H, W)``."""
        probabilities = self.logits(images).softmax(-1)
        return [Prediction.of(self.labels, p) for p in probabilities]

    def attention(self, image: Tensor, *, flow: bool = False) -> ImageAttention:
        """[CLS]-to-patch maps per layer and head, and the rollout (and with ``flow``, the
        flow, up to its limit), for one ``uint8`` image ``(C, H, W)``."""
        self._check(image[None] if isinstance(image, Tensor) else image)
        patch = self.model.config.patch_size
        grid_h, grid_w = image.size(1) // patch, image.size(2) // patch
        with torch.inference_mode():
            out = self.model(to_model_input(image[None]), need_weights=True)
        weights = out.attentions or []  # L x (1, H, 1 + P, 1 + P)
        cls_maps = torch.stack([w[0, :, 0, 1:] for w in weights])  # (L, H, P)
        rolled = attention_rollout(weights)[0, 0, 1:]  # (P,)
        rolled = rolled / rolled.sum().clamp_min(1e-12)
        flowed = None
        if flow and flow_fits(rolled.numel() + 1, 1):
            flowed = attention_flow(weights, rows=[0])[0, 0, 1:]  # (P,)
            flowed = (flowed / flowed.sum().clamp_min(1e-12)).reshape(grid_h, grid_w)
        probabilities = out.logits.float().softmax(-1)[0]
        prediction = Prediction.of(self.labels, probabilities)
        return ImageAttention(
            cls_maps.float().reshape(len(weights), -1, grid_h, grid_w),
            rolled.float().reshape(grid_h, grid_w),
            prediction,
            flowed,
        )

    def evaluate(
        self, split: str = "test", dataset: ImageDataset | None = None, *, limit: int | None = None
    ) -> ClassificationEvaluation:
        """Accuracy, macro-F1 and per-class scores on ``split`` of the model's data set (its
        first ``limit`` images when given)."""
        check_split(split)
        data = self.config.section("data", ImageDataConfig)
        dataset = dataset or load_image_dataset(data.corpus, **data.options)
        if tuple(dataset.classes) != self.labels:
            raise ValueError(
                f"the data set's classes {list(dataset.classes)} are not the model's "
                f"{list(self.labels)}"
            )
        images, labels = dataset.split(split)
        images, labels = images[:limit], labels[:limit]
        if not len(labels):
            raise ValueError(f"the {split} split of {dataset.name} is empty")
        predicted = [self.labels[i] for i in self.logits(images).argmax(-1).tolist()]
        gold = [self.labels[i] for i in labels.tolist()]
        return ClassificationEvaluation.of(split, gold, predicted, self.labels)

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        return self.evaluate(split, limit=limit).report(complete=limit is None)

    def decode_upload(self, data: bytes, name: str, max_side: int) -> Tensor:
        """An uploaded image file's bytes as the model's input ``uint8 (C, H, W)``, resized to
        the training size (no side over ``max_side`` pixels is decoded)."""
        channels, height, width = self.image_shape
        return decode_image(
            data, channels=channels, size=(height, width), name=name, max_side=max_side
        )

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add: ``rollout`` (the
        [CLS] flow beside the rollout it always shows); its image views carry no query and key
        vectors."""
        return frozenset({"rollout"})

    @checked_views
    def views(self, item: Tensor, options: ViewOptions | None = None) -> Seen:
        """The class of the ``uint8 (C, H, W)`` image ``item`` and its [CLS] attention: the
        rollout (and its flow with ``options.rollout``), then each layer's head mean and
        heads."""
        flow = options is not None and options.rollout
        seen = self.attention(item, flow=flow)
        prediction = seen.prediction
        layers, heads = seen.cls_maps.shape[:2]
        title = "[CLS] attention to the patches"
        groups = [MapGroup("rollout", [("rollout", seen.rollout)])]
        if seen.flow is not None:
            groups.append(MapGroup("flow", [("flow", seen.flow)]))
        elif flow:
            title += (
                f"; flow not computed: {seen.rollout.numel() + 1} tokens, over its limit "
                f"(N^3 <= {MAX_FLOW_TOKENS}^4 for one row)"
            )
        for layer in range(layers):
            maps = seen.cls_maps[layer]  # (H, gh, gw)
            groups.append(
                MapGroup(
                    f"layer {layer}",
                    [("head mean", maps.mean(0))] + [(f"head {h}", maps[h]) for h in range(heads)],
                )
            )
        view = ImageView("vit", title, item, groups, layered=True, summaries=len(groups) - layers)
        return Seen(prediction.output(), [view], subject="the image")

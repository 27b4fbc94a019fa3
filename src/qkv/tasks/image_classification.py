"""Image classification end to end: train a Vision Transformer on an image data set
(Fashion-MNIST, MNIST 5k, scikit-learn's digits, or the user's folder), classify new images,
score them (accuracy, macro-F1, per-class scores), and show what the model looks at ([CLS]-to-
patch attention per layer and head, and attention rollout).

Pixels enter the model as ``(x / 255 - 0.5) / 0.5``, in [-1, 1] (the normalisation of the
original ViT code). Training images are augmented (:mod:`qkv.data.augment`); validation and test
images never are.

A trained model directory holds ``config.json`` (``task: image_classification``, the model,
the data set), ``labels.json`` (the class names in label order), ``model.safetensors`` (the best
weights by validation accuracy), ``metrics.csv`` and the run's checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.attention.rollout import attention_rollout
from qkv.data.augment import augment
from qkv.data.images import ImageDataset, load_image_dataset, read_image
from qkv.evaluation.classification import accuracy, macro_f1, per_label_scores
from qkv.io import atomic_write_json
from qkv.models.registry import FAMILIES, build_config, build_model, config_to_dict
from qkv.tasks.classification import ClassificationEvaluation, Prediction
from qkv.tasks.input_checks import LengthLimits, check_lengths, path_list
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    LABELS_FILE,
    WEIGHTS_FILE,
    claim_run_dir,
    load_model_run_config,
)
from qkv.training.checkpoint import CheckpointError, load_weights, read_json, save_weights
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainResult, train, training_device


def to_model_input(images: Tensor) -> Tensor:
    """``uint8`` pixels ``(B, C, H, W)`` as the model's float input in [-1, 1]."""
    if images.dtype != torch.uint8:
        raise ValueError(f"images must be uint8 pixels 0-255, got {images.dtype}")
    return images.float().div_(127.5).sub_(1.0)


@dataclass
class ImageBatch:
    """Images ``(B, C, H, W)`` float in [-1, 1] and their labels ``(B,)``."""

    images: Tensor
    labels: Tensor

    def to(self, device: torch.device) -> ImageBatch:
        return ImageBatch(self.images.to(device), self.labels.to(device))


def image_batches(
    images: Tensor,
    labels: Tensor,
    *,
    batch_size: int,
    shuffle: bool = False,
    augmentation: str = "none",
    max_shift: int = 0,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[ImageBatch]:
    """Batches of ``batch_size`` images (the last may be smaller) after the first ``start``.

    With ``shuffle`` the order is a permutation drawn from ``(seed, epoch)``; each batch's
    augmentation draws from ``(seed, epoch, batch index)``, so skipping ``start`` batches on
    resume gives exactly the batches an uninterrupted run would have seen."""
    n = images.size(0)
    if shuffle:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    else:
        order = torch.arange(n)
    for index, begin in enumerate(range(0, n, batch_size)):
        if index < start:
            continue
        chosen = order[begin : begin + batch_size]
        pixels = images[chosen]
        if augmentation != "none":
            generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 10_007 + index)
            pixels = augment(pixels, augmentation, max_shift, generator)
        yield ImageBatch(to_model_input(pixels), labels[chosen])


def image_classification_loss(label_smoothing: float):
    """``(model, batch) -> (summed cross-entropy, images)`` for the training engine."""

    def loss_fn(model: nn.Module, batch: ImageBatch) -> tuple[Tensor, Tensor]:
        logits = model(batch.images).logits
        loss = F.cross_entropy(
            logits.float(), batch.labels, reduction="sum", label_smoothing=label_smoothing
        )
        return loss, torch.tensor(batch.labels.numel())

    return loss_fn


def model_values(config: RunConfig, dataset: ImageDataset) -> dict[str, Any]:
    """The model section with its ``preset`` expanded and the data set's image size, channels
    and class count filled in (a square image size is needed for the position table)."""
    values = dict(config.model)
    preset = values.pop("preset", None)
    presets = getattr(FAMILIES[config.family][0], "PRESETS", {})
    if preset is not None:
        if preset not in presets:
            raise ValueError(f"unknown model.preset {preset!r}; known: {', '.join(presets)}")
        values = {**presets[preset], **values}
    channels, height, width = dataset.image_shape
    if height != width:
        raise ValueError(
            f"{dataset.name} images are {height}x{width} (height x width); a ViT is trained on "
            "square images: give the folder's options a square size, e.g. size: 32"
        )
    return {
        **values,
        "image_size": height,
        "num_channels": channels,
        "num_labels": dataset.num_classes,
    }


@dataclass(frozen=True)
class TrainedImageClassifier:
    """A finished run: where its model is, how training ended, how many parameters."""

    model_dir: Path
    result: TrainResult
    parameters: int


def train_image_classifier(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
    dataset: ImageDataset | None = None,
) -> TrainedImageClassifier:
    """Train ``config``'s Vision Transformer; the best weights (by validation accuracy) go to
    ``config.out_dir``. Arguments as :func:`qkv.tasks.translation.train_translation`;
    ``dataset`` replaces the one the configuration names (tests)."""
    if config.task != "image_classification":
        raise ValueError(
            f"train_image_classifier needs task image_classification, got {config.task!r}"
        )
    if config.family != "vit":
        raise ValueError(f"image classification trains model.family vit, got {config.family!r}")
    dist_ = distributed or Distributed()
    data = config.data
    dataset = dataset or load_image_dataset(data.corpus, **data.options)  # type: ignore[union-attr]
    out = Path(config.out_dir)
    training_device(config.train, dist_)  # reject what can be rejected before any write
    if not resume and dist_.main:
        claim_run_dir(out, overwrite)
    torch.manual_seed(config.train.seed)
    model_config = build_config(config.family, model_values(config, dataset))
    model = build_model(config.family, model_config)
    if dist_.main:
        out.mkdir(parents=True, exist_ok=True)
        saved = config.to_dict()
        saved["model"] = {"family": config.family, **config_to_dict(model_config)}
        atomic_write_json(out / CONFIG_FILE, saved)
        atomic_write_json(out / LABELS_FILE, list(dataset.classes))
    train_images, train_labels = dataset.split("train")
    valid_images, valid_labels = dataset.split("valid")
    if not len(valid_labels):
        raise ValueError(f"{dataset.name} has no validation images to choose the best model by")
    eval_size = config.decode.batch_size  # type: ignore[union-attr]

    def evaluate() -> dict[str, float]:
        device = next(model.parameters()).device
        predicted: list[int] = []
        for batch in image_batches(valid_images, valid_labels, batch_size=eval_size):
            predicted.extend(model(batch.images.to(device)).logits.argmax(-1).tolist())
        gold = valid_labels.tolist()
        return {
            "valid_accuracy": accuracy(gold, predicted),
            "valid_macro_f1": macro_f1(gold, predicted),
        }

    result = train(
        model,
        loss_fn=image_classification_loss(config.train.label_smoothing),
        batches=lambda epoch, start: image_batches(
            train_images,
            train_labels,
            batch_size=data.batch_size,  # type: ignore[union-attr]
            shuffle=True,
            augmentation=data.augment,  # type: ignore[union-attr]
            max_shift=data.max_shift,  # type: ignore[union-attr]
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        config=config.train,
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        on_best=lambda _: save_weights(model, out / WEIGHTS_FILE),
        run_dir=out,
        resume=resume,
        handle_signals=handle_signals,
        progress=progress,
        count_tokens=lambda batch: int(batch.labels.numel()),
        distributed=dist_,
    )
    parameters = sum(p.numel() for p in model.parameters())
    return TrainedImageClassifier(out, result, parameters)


@dataclass(frozen=True)
class ImageAttention:
    """What a Vision Transformer looks at in one image.

    Attributes:
        cls_maps: ``(L, H, gh, gw)``: each layer's and head's attention from [CLS] to every
            patch (each ``(gh, gw)`` sums to 1 minus the weight [CLS] puts on itself).
        rollout: ``(gh, gw)``: the [CLS] row of the attention rollout over all layers
            (:func:`qkv.attention.rollout.attention_rollout`), renormalised over the patches.
        prediction: the image's class and the probability of each class.
    """

    cls_maps: Tensor
    rollout: Tensor
    prediction: Prediction


class ImageClassifier:
    """A trained Vision Transformer with its class names.

    Its inputs' length is their patch count: the model was trained at ``image_size`` (its
    position table's grid) and interpolates the table for other sizes, so it takes
    :data:`~qkv.tasks.input_checks.HARD_LIMIT_FACTOR` times the trained patch count. Larger
    images are a ``ValueError`` raised before any pixel is converted; images of more patches
    than in training warn (:meth:`read_images` resizes files to the training size).
    """

    def __init__(self, model: nn.Module, labels: Sequence[str], config: RunConfig) -> None:
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
        size = self.config.decode.batch_size  # type: ignore[union-attr]
        out = torch.empty(images.size(0), len(self.labels))
        with torch.inference_mode():
            for begin in range(0, images.size(0), size):
                batch = to_model_input(images[begin : begin + size])
                out[begin : begin + size] = self.model(batch).logits.float()
        return out

    def predict(self, images: Tensor) -> list[Prediction]:
        """The class of each ``uint8`` image ``(N, C, H, W)``."""
        probabilities = self.logits(images).softmax(-1)
        return [
            Prediction(
                self.labels[int(p.argmax())],
                {label: float(v) for label, v in zip(self.labels, p, strict=True)},
            )
            for p in probabilities
        ]

    def attention(self, image: Tensor) -> ImageAttention:
        """[CLS]-to-patch maps per layer and head, and the rollout, for one ``uint8`` image
        ``(C, H, W)``."""
        self._check(image[None] if isinstance(image, Tensor) else image)
        patch = self.model.config.patch_size
        grid_h, grid_w = image.size(1) // patch, image.size(2) // patch
        with torch.inference_mode():
            out = self.model(to_model_input(image[None]), need_weights=True)
        weights = out.attentions or []  # L x (1, H, 1 + P, 1 + P)
        cls_maps = torch.stack([w[0, :, 0, 1:] for w in weights])  # (L, H, P)
        rolled = attention_rollout(weights)[0, 0, 1:]  # (P,)
        rolled = rolled / rolled.sum().clamp_min(1e-12)
        probabilities = out.logits.float().softmax(-1)[0]
        prediction = Prediction(
            self.labels[int(probabilities.argmax())],
            {label: float(v) for label, v in zip(self.labels, probabilities, strict=True)},
        )
        return ImageAttention(
            cls_maps.float().reshape(len(weights), -1, grid_h, grid_w),
            rolled.float().reshape(grid_h, grid_w),
            prediction,
        )

    def evaluate(
        self, split: str = "test", dataset: ImageDataset | None = None
    ) -> ClassificationEvaluation:
        """Accuracy, macro-F1 and per-class scores on ``split`` of the model's data set."""
        if split not in ("train", "valid", "test"):
            raise ValueError(f"split must be train, valid or test, got {split!r}")
        data = self.config.data
        dataset = dataset or load_image_dataset(data.corpus, **data.options)  # type: ignore[union-attr]
        if tuple(dataset.classes) != self.labels:
            raise ValueError(
                f"the data set's classes {list(dataset.classes)} are not the model's "
                f"{list(self.labels)}"
            )
        images, labels = dataset.split(split)
        if not len(labels):
            raise ValueError(f"the {split} split of {dataset.name} is empty")
        predicted = [self.labels[i] for i in self.logits(images).argmax(-1).tolist()]
        gold = [self.labels[i] for i in labels.tolist()]
        return ClassificationEvaluation(
            split,
            len(gold),
            accuracy(gold, predicted),
            macro_f1(gold, predicted, labels=list(self.labels)),
            per_label_scores(gold, predicted, labels=list(self.labels)),
        )

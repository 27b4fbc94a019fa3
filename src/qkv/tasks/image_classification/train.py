"""Image classification end to end: train a Vision Transformer on an image data set
(Fashion-MNIST, MNIST 5k, scikit-learn's digits, or the user's folder), classify new images,
score them (accuracy, macro-F1, per-class scores), and show what the model looks at ([CLS]-to-
patch attention per layer and head, and attention rollout).

Pixels enter the model as ``(x / 255 - 0.5) / 0.5``, in [-1, 1] (the normalisation of the
original ViT code). Training images are augmented (:mod:`qkv.data.images.augment`); validation and
test
images never are.

A trained model directory holds ``config.json`` (``task: image_classification``, the model,
the data set), ``labels.json`` (the class names in label order), ``model.safetensors`` (the best
weights by validation accuracy), ``metrics.csv`` and the run's checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.images.augment import augment
from qkv.data.images.datasets import ImageDataset, load_image_dataset
from qkv.evaluation.classification import accuracy, macro_f1
from qkv.io import atomic_write_json
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.tasks.image_classification.config import ImageDataConfig
from qkv.tasks.image_classification.runner import to_model_input
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    LABELS_FILE,
)
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.sections import PredictConfig


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
    values = with_preset(config.family, config.model)
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


def train_image_classifier(run: TrainingRun, dataset: ImageDataset | None = None) -> Trained:
    """Train ``config``'s Vision Transformer; the best weights (by validation accuracy) go to
    ``config.out_dir``. Arguments as :func:`qkv.tasks.translation.train.train_translation`;
    ``dataset`` replaces the one the configuration names (tests)."""
    config = run.config
    data = config.section("data", ImageDataConfig)
    dataset = dataset or load_image_dataset(data.corpus, **data.options)
    model_config = build_config(config.family, model_values(config, dataset))
    model = build_model(config.family, model_config)
    run.save(
        model_config, write=lambda out: atomic_write_json(out / LABELS_FILE, list(dataset.classes))
    )
    train_images, train_labels = dataset.split("train")
    valid_images, valid_labels = dataset.split("valid")
    if not len(valid_labels):
        raise ValueError(f"{dataset.name} has no validation images to choose the best model by")
    eval_size = config.section("decode", PredictConfig).batch_size

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

    return run.train(
        model,
        loss_fn=image_classification_loss(config.train.label_smoothing),
        batches=lambda epoch, start: image_batches(
            train_images,
            train_labels,
            batch_size=data.batch_size,
            shuffle=True,
            augmentation=data.augment,
            max_shift=data.max_shift,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        count_tokens=lambda batch: int(batch.labels.numel()),
    )

"""The models an explorer serves, loaded once at start-up, and one request run against them.

:class:`ExplorerModels` loads each model directory given on the command line, names it (its
folder name, made unique), and keeps one lock per model: a request waits for the model's lock, so
a model is never run by two threads at once (requests to different models run side by side).
Requests name a model by that name only, never by a path.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from qkv.data.errors import DataError
from qkv.data.images import decode_image
from qkv.explorer.views import (
    IMAGE_KINDS,
    InputError,
    Limits,
    check_text,
    check_text_tokens,
    check_unicode,
    explore_captioner,
    explore_classification,
    explore_language_model,
    explore_tagging,
    explore_translation,
    explore_vit,
)
from qkv.tasks.run_dir import model_task

KIND_LABELS = {
    "translation": "translation",
    "language_model": "language model",
    "classification": "text classifier",
    "tagging": "tagger",
    "image_classification": "Vision Transformer",
    "captioning": "captioner",
}


def _load(kind: str, directory: Path) -> Any:
    if kind == "translation":
        from qkv.tasks.translation import Translator

        return Translator.load(directory)
    if kind == "language_model":
        from qkv.tasks.language_model import LanguageModel

        return LanguageModel.load(directory)
    if kind == "classification":
        from qkv.tasks.classification import Classifier

        return Classifier.load(directory)
    if kind == "tagging":
        from qkv.tasks.tagging import Tagger

        return Tagger.load(directory)
    if kind == "image_classification":
        from qkv.tasks.image_classification import ImageClassifier

        return ImageClassifier.load(directory)
    if kind == "captioning":
        from qkv.tasks.captioning import Captioner

        return Captioner.load(directory)
    raise ValueError(f"{directory} holds a {kind} model, which the explorer cannot show")


@dataclass
class ExplorerModel:
    """One loaded model: its name in requests, its task, where it came from."""

    name: str
    kind: str
    directory: Path
    runner: Any = field(repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def takes_image(self) -> bool:
        return self.kind in IMAGE_KINDS

    def describe(self) -> dict[str, Any]:
        """What the page needs to offer this model: name, task and the input it takes."""
        return {
            "name": self.name,
            "kind": self.kind,
            "label": KIND_LABELS[self.kind],
            "input": "image" if self.takes_image else "text",
        }

    def image(self, data: bytes, name: str, limits: Limits) -> Tensor:
        """An uploaded image as this model's input ``uint8 (C, H, W)``: a ViT's training size;
        for a captioner, the tile height and a whole number of tiles (resized when needed)."""
        if len(data) > limits.max_image_bytes:
            raise InputError(
                f"{name} has {len(data):,} bytes; at most {limits.max_image_bytes:,} are accepted"
            )
        if self.kind == "image_classification":
            channels, height, width = self.runner.image_shape
            size: tuple[int, int] | None = (height, width)
        else:
            channels, height, width = self.runner.tile_shape
            size = None
        try:
            image = decode_image(
                data, channels=channels, size=size, name=name, max_side=limits.max_image_side
            )
        except DataError as error:
            raise InputError(str(error)) from None
        if self.kind == "captioning" and (image.size(1) != height or image.size(2) % width):
            tiles = max(1, round(image.size(2) * height / image.size(1) / width))
            image = decode_image(data, channels=channels, size=(height, tiles * width), name=name)
        return image

    def run(
        self,
        *,
        text: str | None = None,
        image: bytes | None = None,
        image_name: str = "image",
        max_new_tokens: int | None = None,
        limits: Limits,
    ) -> dict[str, Any]:
        """Run the model on one input and return its output and attention views
        (:mod:`qkv.explorer.views`). Checks what the input alone decides (its size, its tokens
        against the limits) first, then takes the model's lock for the run.

        Raises:
            InputError: the input does not suit the model or the limits.
        """
        label = f"model {self.name!r} ({KIND_LABELS[self.kind]})"
        if self.takes_image and (image is None or text is not None):
            raise InputError(f'{label} takes an image (base64 in "image"), not text')
        if not self.takes_image and (text is None or image is not None):
            raise InputError(f'{label} takes text (in "text"), not an image')
        if max_new_tokens is not None and self.kind != "language_model":
            raise InputError("max_new_tokens is for language models")
        # Every check that the input alone decides (sizes, pixels, tokens) comes first, so that
        # bad input never waits for the lock, nor holds it while the model runs.
        new_tokens = 0
        if self.takes_image:
            check_unicode(image_name, "image_name")
            pixels = self.image(image, image_name, limits)  # type: ignore[arg-type]
            size = {"width": int(pixels.size(2)), "height": int(pixels.size(1))}
            described: dict[str, Any] = {"image": {"name": image_name, **size}}
        else:
            text = check_text(text, limits)  # type: ignore[arg-type]
            new_tokens = check_text_tokens(self.kind, self.runner, text, limits, max_new_tokens)
            described = {"text": text}
        with self.lock:
            try:
                if self.kind == "image_classification":
                    result = explore_vit(self.runner, pixels)
                elif self.kind == "captioning":
                    result = explore_captioner(self.runner, pixels, image_name)
                else:
                    result = self._run_text(text, new_tokens, limits)  # type: ignore[arg-type]
            except InputError:
                raise
            except ValueError as error:  # the library's own checks name what is wrong
                raise InputError(str(error)) from None
        return {"model": self.name, "kind": self.kind, "input": described, **result}

    def _run_text(self, text: str, new_tokens: int, limits: Limits) -> dict[str, Any]:
        if self.kind == "translation":
            return explore_translation(self.runner, text, limits)
        if self.kind == "language_model":
            return explore_language_model(self.runner, text, limits, new_tokens)
        if self.kind == "classification":
            return explore_classification(self.runner, text, limits)
        return explore_tagging(self.runner, text, limits)


class ExplorerModels:
    """The models of one explorer, by name, in the order given."""

    def __init__(self, models: Sequence[ExplorerModel]) -> None:
        if not models:
            raise ValueError("the explorer needs at least one model")
        self._models = {m.name: m for m in models}
        if len(self._models) != len(models):
            raise ValueError(f"model names must be distinct, got {[m.name for m in models]}")

    @classmethod
    def load(cls, directories: Sequence[str | Path]) -> ExplorerModels:
        """Load each model directory (any task but embeddings); names are the folder names,
        with ``-2``, ``-3`` appended to repeats."""
        models: list[ExplorerModel] = []
        taken: set[str] = set()
        for entry in directories:
            directory = Path(entry)
            kind = model_task(directory)
            name, n = directory.resolve().name or "model", 2
            while name in taken:
                name, n = f"{directory.resolve().name}-{n}", n + 1
            taken.add(name)
            models.append(ExplorerModel(name, kind, directory, _load(kind, directory)))
        return cls(models)

    def __getitem__(self, name: str) -> ExplorerModel:
        if name not in self._models:
            raise KeyError(
                f"unknown model {name!r}; this explorer serves {', '.join(self._models)}"
            )
        return self._models[name]

    def __iter__(self):
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def describe(self) -> list[dict[str, Any]]:
        return [m.describe() for m in self._models.values()]

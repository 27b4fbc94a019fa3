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
from qkv.explorer.views import (
    InputError,
    Limits,
    check_text,
    check_text_tokens,
    check_unicode,
    check_views,
    seen_json,
)
from qkv.tasks.seen import Seen
from qkv.tasks.spec import TaskSpec, ViewOptions, resolve
from qkv.tasks.view_extras import EXTRAS

# What each engine reads a model directory as: the task it is served as, whose runner loads it
# (the only place the explorer tells engines apart). qkv: a trained run directory, any task;
# ctranslate2: an export (qkv export --format ctranslate2) of a translation model.
ENGINE_TASKS = {
    "qkv": "qkv.tasks.run_dir:model_task",
    "ctranslate2": "qkv.ctranslate2.views:exported_task",
}
OWN_THREADS = {"ctranslate2"}  # engines with CPU threads of their own (not PyTorch's)


@dataclass(frozen=True)
class ViewExtras:
    """What a run adds to its views on request (:class:`~qkv.tasks.spec.ViewOptions`): the
    query and key vectors of a Transformer (``neuron``), an encoder's rollout and flow views
    (``rollout``); a task without them refuses the request."""

    neuron: bool = False
    rollout: bool = False


@dataclass
class ExplorerModel:
    """One loaded model: its name in requests, its task, where it came from."""

    name: str
    spec: TaskSpec
    directory: Path
    runner: Any = field(repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kind(self) -> str:
        return self.spec.name

    @property
    def takes_image(self) -> bool:
        return self.spec.input == "image"

    def describe(self) -> dict[str, Any]:
        """What the page needs to offer this model: name, task, the input it takes and the
        extras its views can add (its runner's ``extras()``, in :class:`ViewExtras`' order)."""
        extras = self.runner.extras()
        return {
            "name": self.name,
            "kind": self.kind,
            "label": self.spec.label,
            "input": self.spec.input,
            "extras": [name for name in EXTRAS if name in extras],
        }

    def image(self, data: bytes, name: str, limits: Limits) -> Tensor:
        """An uploaded image as this model's input ``uint8 (C, H, W)`` (its runner's
        ``decode_upload``: a ViT's training size; for a captioner, the tile height and a whole
        number of tiles)."""
        if len(data) > limits.max_image_bytes:
            raise InputError(
                f"{name} has {len(data):,} bytes; at most {limits.max_image_bytes:,} are accepted"
            )
        try:
            return self.runner.decode_upload(data, name, limits.max_image_side)
        except DataError as error:
            raise InputError(str(error)) from None

    def run(
        self,
        *,
        text: str | None = None,
        image: bytes | None = None,
        image_name: str = "image",
        max_new_tokens: int | None = None,
        limits: Limits,
        extras: ViewExtras | None = None,
    ) -> dict[str, Any]:
        """Run the model on one input and return its output and attention views
        (:mod:`qkv.explorer.views`): :meth:`seen` as JSON.

        Raises:
            InputError: the input does not suit the model or the limits.
        """
        seen, described = self.seen(text=text, image=image, image_name=image_name,
                                    max_new_tokens=max_new_tokens, limits=limits,
                                    extras=extras)  # fmt: skip
        try:
            result = seen_json(seen)
        except InputError:
            raise
        except ValueError as error:  # the library's own checks name what is wrong
            raise InputError(str(error)) from None
        return {"model": self.name, "kind": self.kind, "input": described, **result}

    def seen(
        self,
        *,
        text: str | None = None,
        image: bytes | None = None,
        image_name: str = "image",
        max_new_tokens: int | None = None,
        limits: Limits,
        extras: ViewExtras | None = None,
        target: str | None = None,
    ) -> tuple[Seen, dict[str, Any]]:
        """Run the model on one input (reading ``target`` as its output instead of writing its
        own: :attr:`ViewOptions.target`): its :class:`Seen` and the input as described in a
        result. Checks what the input alone decides (its size, its tokens against the limits)
        first, then takes the model's lock for the run, then checks the views' lengths against
        the limits (:func:`~qkv.explorer.views.check_views`): whoever shows the result, one
        model's page or a comparison, shows nothing over them.

        Raises:
            InputError: the input does not suit the model or the limits.
        """
        label = f"model {self.name!r} ({self.spec.label})"
        if self.takes_image and text is not None:
            raise InputError(f'{label} takes an image (base64 in "image"), not text')
        if self.takes_image and image is None:
            raise InputError(f'{label} takes an image: "image" must be a base64 string, got none')
        if not self.takes_image and image is not None:
            raise InputError(f'{label} takes text (in "text"), not an image')
        if not self.takes_image and text is None:
            raise InputError(f'{label} takes text: "text" must be a string, got none (null)')
        if max_new_tokens is not None and not self.spec.generates:
            raise InputError("max_new_tokens is for language models")
        # Every check that the input alone decides (sizes, pixels, tokens) comes first, so that
        # bad input never waits for the lock, nor holds it while the model runs.
        new_tokens = 0
        if self.takes_image:
            check_unicode(image_name, "image_name")
            assert image is not None  # checked above: a model that takes an image got one
            item: Any = self.image(image, image_name, limits)
            size = {"width": int(item.size(2)), "height": int(item.size(1))}
            described: dict[str, Any] = {"image": {"name": image_name, **size}}
        else:
            assert text is not None  # checked above: a model that takes text got it
            item = check_text(text, limits)
            new_tokens = check_text_tokens(self.spec, self.runner, item, limits, max_new_tokens)
            described = {"text": item}
        extras = extras or ViewExtras()
        options = ViewOptions(
            new_tokens=0 if target is not None else new_tokens, name=image_name,
            neuron=extras.neuron, rollout=extras.rollout, target=target,
        )  # fmt: skip
        with self.lock:
            try:
                seen = self.runner.views(item, options)  # refuses extras it cannot show
            except ValueError as error:  # the library's own checks name what is wrong
                raise InputError(str(error)) from None
        return check_views(seen, limits), described


class ExplorerModels:
    """The models of one explorer, by name, in the order given."""

    def __init__(self, models: Sequence[ExplorerModel]) -> None:
        if not models:
            raise ValueError("the explorer needs at least one model")
        self._models = {m.name: m for m in models}
        if len(self._models) != len(models):
            raise ValueError(f"model names must be distinct, got {[m.name for m in models]}")

    @classmethod
    def load(
        cls,
        directories: Sequence[str | Path],
        *,
        precision: str | None = None,
        engine: str = "qkv",
        threads: int | None = None,
    ) -> ExplorerModels:
        """Load each model directory (any task but embeddings); names are the folder names,
        with ``-2``, ``-3`` appended to repeats. ``precision`` (``"bfloat16"``, ``"int8"``):
        the weights of the models that decode (translation, language models); a directory of
        another task is then refused, naming it. ``engine`` (:data:`ENGINE_TASKS`) runs every
        model: ``"ctranslate2"`` takes exported translation models only (``precision`` is then
        CTranslate2's compute type; default: the exported type) and refuses anything else,
        naming the directory. ``threads``: the CPU threads of an engine with threads of its own
        (CTranslate2's per call; default: its own choice); qkv's models use PyTorch's, which
        the caller sets (``torch.set_num_threads``)."""
        if engine not in ENGINE_TASKS:
            raise ValueError(f"engine must be one of {', '.join(ENGINE_TASKS)}, got {engine!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):  # fmt: skip
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        own_threads = {} if threads is None or engine not in OWN_THREADS else {"threads": threads}
        task_of = resolve(ENGINE_TASKS[engine])
        models: list[ExplorerModel] = []
        taken: set[str] = set()
        for entry in directories:
            directory = Path(entry)
            spec = task_of(directory)
            name, n = directory.resolve().name or "model", 2
            while name in taken:
                name, n = f"{directory.resolve().name}-{n}", n + 1
            taken.add(name)
            if precision is None:
                runner = spec.load(directory, **own_threads)
            elif spec.precisions:
                runner = spec.load(directory, precision=precision, **own_threads)
            else:
                raise ValueError(
                    f"{directory} holds a {spec.label}, which takes no precision; serve it "
                    f"without --precision {precision}, or apart from the models that take one"
                )
            models.append(ExplorerModel(name, spec, directory, runner))
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

"""The shape every task has: a :class:`TaskSpec` record, the :class:`Runner` a trained model
directory loads into, and the typed values a runner returns (a :class:`Report` of its scores,
:class:`~qkv.tasks.seen.Seen`: its output on one input with the attention
:class:`~qkv.tasks.seen.TokenView` and :class:`~qkv.tasks.seen.ImageView` that
``qkv plot-attention`` draws and the explorer sends; they live in :mod:`qkv.tasks.seen`).

    spec = task("translation")                  # qkv.tasks.registry
    run = TrainingRun(config, progress=True)     # qkv.tasks.run_skeleton: claims out_dir, seeds
    trained = spec.train(run)                    # trains, keeps the best weights
    runner = spec.load("runs/demo")              # a Runner
    report = runner.report("test", limit=None, options=EvaluateOptions(beam=4))
    report.lines                                 # what `qkv evaluate` shows, one per line
    seen = runner.views("Au commencement ...", ViewOptions())
    seen.views[0]                                # TokenView("cross", ...): (H, T, S) per layer

Nothing here knows a task by name: the CLI and the explorer ask a runner and its spec's
``evaluate_options`` / ``view_options`` (what flags it takes) and ``input`` (text or image).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from qkv.tasks.seen import Seen
from qkv.training.config import TASK_SETTINGS

# What a runner's views return (Seen, TokenView, ImageView, MapGroup) lives in qkv.tasks.seen
# and is documented there; it is imported here too, beside the options, for the runners.
__all__ = [
    "EVALUATE_OPTIONS",
    "GIVEN",
    "VIEW_OPTIONS",
    "EvaluateOptions",
    "Report",
    "Runner",
    "TaskSpec",
    "ViewOptions",
    "resolve",
]

# The options of `qkv evaluate` and `qkv plot-attention` that only some tasks take (every task
# takes --split, --limit and --no-save; every task draws its first view).
EVALUATE_OPTIONS = ("beam", "examples", "batch_size")
VIEW_OPTIONS = ("beam", "layer", "pooling", "heads")


@dataclass(frozen=True)
class EvaluateOptions:
    """What ``qkv evaluate`` may ask of a runner beyond the split and the limit (``None``: the
    model's own setting)."""

    beam: int | None = None
    batch_size: int | None = None
    examples: int | None = None
    progress: bool = False


# Said after a views() summary whose output came from ViewOptions.target, not from the model.
GIVEN = " (given: read, not written by this model)"


@dataclass(frozen=True)
class ViewOptions:
    """What a view of one input may ask for: a translation's ``beam``; a classifier's
    ``pooling`` weights first instead of its self-attention; how many tokens a language model
    generates (``new_tokens``); the input's ``name`` (an image file's); ``neuron``: a
    Transformer's query and key vectors on its token views
    (:attr:`~qkv.tasks.seen.TokenView.vectors`, for the page's neuron view); ``rollout``: an
    encoder's attention rollout (and flow, up to :data:`~qkv.attention.flow.MAX_FLOW_TOKENS`
    tokens) as views of their own, and a ViT's [CLS] flow as a map next to its rollout (which
    it always shows; flow up to :func:`~qkv.attention.flow.flow_fits` for one row). Both are off
    by default, so that pages stay light. ``target``: for a model that writes text (translation,
    summarisation, dialogue, the language model's continuation), an output to read instead of
    its own (teacher forcing on the given text, no decoding), so that two models' attention can
    be compared on one output (:meth:`~qkv.tasks.seen.Seen.compare`)."""

    beam: int | None = None
    pooling: bool = False
    new_tokens: int = 0
    name: str = "image"
    neuron: bool = False
    rollout: bool = False
    target: str | None = None

    def __post_init__(self) -> None:
        if self.target is not None and (
            not isinstance(self.target, str) or not self.target.strip()
        ):
            raise ValueError(
                f"target must be a non-empty str (the output to read), got {self.target!r}; "
                "leave it out (None) to read the model's own output"
            )


@dataclass(frozen=True)
class Report:
    """A model's scores on one split.

    Attributes:
        split: the split scored; complete: False when only the first ``--limit`` were scored
            (such scores are not the split's and are not recorded).
        lines: what ``qkv evaluate`` prints, one line per item.
        record: what ``results.json`` keeps under the split (JSON values only).
    """

    split: str
    lines: list[str]
    record: dict[str, Any]
    complete: bool = True


class Runner(Protocol):
    """A trained model directory, loaded: what ``qkv evaluate``, ``qkv plot-attention`` and the
    explorer call. Text runners also count tokens (``token_count(text)``) so that limits are
    checked before a model runs; image runners decode uploads (``decode_upload``)."""

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report: ...

    def views(self, item: Any, options: ViewOptions | None = None) -> Seen: ...

    def extras(self) -> frozenset[str]:
        """Which of ``"neuron"`` and ``"rollout"`` (:class:`ViewOptions`) ``views`` can add,
        decided without running the model (the explorer offers them by it)."""
        ...


@dataclass(frozen=True)
class TaskSpec:
    """One task: its name in ``task:``, a label for people, the input it takes, its
    configuration sections and model families, how to train and how to load a trained model.

    Attributes:
        sections: the config class of each of ``data``, ``train`` and ``decode``.
        model_keys: ``model:`` keys the task itself reads (``preset``, ``pretrained``) or fills
            in from the data (vocabulary sizes, label counts), beyond the family's own.
        evaluate_options / view_options: which of :data:`EVALUATE_OPTIONS` and
            :data:`VIEW_OPTIONS` it takes; the CLI refuses the others, naming the task.
        splits: the splits ``evaluate`` scores.
        generates: a runner that writes new tokens after its input (``max_new_tokens``).
        train_settings: which of the ``train:`` settings that belong to the task
            (:data:`~qkv.training.config.TASK_SETTINGS`: ``batch_tokens``, ``label_smoothing``)
            it reads; a configuration that sets another one is refused, naming the task.
        moved_model_keys: ``model:`` keys that now live in another section (an objective
            weight moved to ``train:``), each with its new ``section.key``: a saved run's
            ``config.json`` is read with the value moved; a YAML file that sets the old key is
            refused, naming the new place.
        trainer / runner / exporter: where the task's training function
            (``train(run: TrainingRun) -> Trained``), its runner class (with ``load``) and its
            CTranslate2 export (``export(model_dir, out_dir, *, quantization, overwrite)``,
            ``qkv export``; ``None``: its models cannot be exported) live, as
            ``"module:name"``. They are imported when called, so reading a task's sections (a
            YAML file being parsed) imports none of its training, data or model code.
        precisions: whether ``load`` takes ``precision=`` (``"float32"``, ``"bfloat16"``,
            ``"int8"``; :mod:`qkv.layers.packed_linear`): the weights its decoding reads
            (``qkv serve --precision``).
    """

    name: str
    label: str
    input: Literal["text", "image"]
    families: tuple[str, ...]
    sections: Mapping[str, type]
    trainer: str
    runner: str
    model_keys: frozenset[str] = frozenset()
    evaluate_options: frozenset[str] = frozenset()
    view_options: frozenset[str] = frozenset()
    splits: tuple[str, ...] = ("train", "valid", "test")
    generates: bool = False
    train_settings: frozenset[str] = frozenset(TASK_SETTINGS)
    moved_model_keys: Mapping[str, str] = field(default_factory=dict)
    exporter: str | None = None
    precisions: bool = False

    def __post_init__(self) -> None:
        for ref in (self.trainer, self.runner, self.exporter):
            if ref is not None and (not isinstance(ref, str) or ref.count(":") != 1):
                raise ValueError(f"task {self.name}: {ref!r} is not a 'module:name' reference")
        if not self.train_settings <= set(TASK_SETTINGS):
            raise ValueError(
                f"task {self.name}: unknown train setting(s) "
                f"{sorted(self.train_settings - set(TASK_SETTINGS))}"
            )
        odd = (self.evaluate_options - set(EVALUATE_OPTIONS)) | (
            self.view_options - set(VIEW_OPTIONS)
        )
        if odd:
            raise ValueError(f"task {self.name}: unknown option(s) {sorted(odd)}")

    def train(self, run: Any) -> Any:
        """Train the run (a :class:`~qkv.tasks.run_skeleton.TrainingRun` of this task's
        configuration); returns its :class:`~qkv.tasks.run_skeleton.Trained`."""
        return resolve(self.trainer)(run)

    def load(self, model_dir: str | Path, **options: Any) -> Any:
        """The trained model in ``model_dir`` as this task's runner (``precision=`` where
        :attr:`precisions`)."""
        return resolve(self.runner).load(model_dir, **options)

    @property
    def export_ctranslate2(self) -> Callable[..., Any] | None:
        """The task's CTranslate2 export function, or ``None`` when its models cannot be
        exported."""
        return None if self.exporter is None else resolve(self.exporter)

    @property
    def plural(self) -> str:
        return f"{self.label}s"

    def check_options(self, command: str, given: Sequence[str], kind: str) -> None:
        """Refuse the options in ``given`` that this task does not take, naming the task:
        ``kind`` is ``"evaluate"`` or ``"view"`` (:data:`EVALUATE_OPTIONS`,
        :data:`VIEW_OPTIONS`); ``command`` names the command in the message."""
        every, taken = (
            (EVALUATE_OPTIONS, self.evaluate_options)
            if kind == "evaluate"
            else (VIEW_OPTIONS, self.view_options)
        )
        refused = [name for name in given if name not in taken]
        if refused:
            others = [name for name in every if name not in taken]
            verb = "is" if len(others) == 1 else "are"
            raise ValueError(
                f"{command} {_flags(refused)}: {_flags(others)} {verb} not for {self.plural}"
            )


def resolve(ref: str) -> Any:
    """The object a ``"module:name"`` reference names, its module imported now."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _flags(names: Sequence[str]) -> str:
    """``--beam, --layer and --heads``."""
    flags = [f"--{name.replace('_', '-')}" for name in names]
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"

"""The shape every task has: a :class:`TaskSpec` record, the :class:`Runner` a trained model
directory loads into, and the typed values a runner returns (a :class:`Report` of its scores,
:class:`Seen`: its output on one input with the attention :class:`TokenView` and
:class:`ImageView` that ``qkv plot-attention`` draws and the explorer sends).

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
from typing import TYPE_CHECKING, Any, Literal, Protocol

from torch import Tensor

from qkv.training.config import TASK_SETTINGS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from qkv.viz.compare import Compared

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


@dataclass(frozen=True)
class ViewOptions:
    """What a view of one input may ask for: a translation's ``beam``; a classifier's
    ``pooling`` weights first instead of its self-attention; how many tokens a language model
    generates (``new_tokens``); the input's ``name`` (an image file's); ``neuron``: a
    Transformer's query and key vectors on its token views (:attr:`TokenView.vectors`, for the
    page's neuron view); ``rollout``: an encoder's attention rollout (and flow, up to
    :data:`~qkv.attention.flow.MAX_FLOW_TOKENS` tokens) as views of their own, and a ViT's
    [CLS] flow as a map next to its rollout (which it always shows; flow up to
    :func:`~qkv.attention.flow.flow_fits` for one row). Both are off by default, so that pages
    stay light."""

    beam: int | None = None
    pooling: bool = False
    new_tokens: int = 0
    name: str = "image"
    neuron: bool = False
    rollout: bool = False


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


class _Drawn:
    """What a view saves: its :meth:`figure` (``layer`` / ``head``, see there) to a file."""

    def figure(self, *, layer: int | None = None, head: int | None = None) -> Figure:
        raise NotImplementedError

    def save(
        self,
        path: str | Path,
        *,
        layer: int | None = None,
        head: int | None = None,
        format: str | None = None,
    ) -> Path:
        """Draw :meth:`figure` to ``path`` as PNG, SVG or PDF by its suffix (or ``format``,
        for ``-``: standard output), whole or not at all; the format is checked first."""
        from qkv.viz.figure_file import figure_format, save_figure

        kind = figure_format(path, format)
        return save_figure(self.figure(layer=layer, head=head), path, format=kind)


@dataclass(frozen=True)
class TokenView(_Drawn):
    """Token-to-token attention: one ``(H, Tq, Tk)`` tensor per layer; ``self_attention`` when
    queries and keys are one sequence; ``axes``: the plot's (keys, queries) axis names
    (default: key and query for self-attention, source and target otherwise); ``vectors``
    (with :attr:`ViewOptions.neuron`): per layer the query vectors ``(H, Tq, Dk)`` and key
    vectors ``(Hkv, Tk, Dk)`` the weights were computed from (the neuron view)."""

    id: str
    title: str
    queries: list[str]
    keys: list[str]
    layers: list[Tensor]
    self_attention: bool
    axes: tuple[str, str] | None = None
    vectors: list[tuple[Tensor, Tensor]] | None = None

    def __post_init__(self) -> None:
        for index, weights in enumerate(self.layers):
            if weights.dim() != 3 or tuple(weights.shape[1:]) != (
                len(self.queries),
                len(self.keys),
            ):
                raise ValueError(
                    f"layer {index} of {self.id!r} has shape {tuple(weights.shape)}, expected "
                    f"(H, {len(self.queries)}, {len(self.keys)})"
                )
        if self.vectors is not None:
            check_vectors(self.id, self.layers, self.vectors)

    @property
    def axis_labels(self) -> tuple[str, str]:
        if self.axes is not None:
            return self.axes
        return ("key", "query") if self.self_attention else ("source", "target")

    def figure(self, *, layer: int | None = None, head: int | None = None) -> Figure:
        """The heatmap of ``layer`` (default: the last; negative: from the end) and ``head``
        (default: the mean of the heads), titled with :attr:`title`, the layer and the head,
        its axes named by :attr:`axis_labels`, with a colour bar."""
        from qkv.viz.attention_views import token_view_figure

        return token_view_figure(self.layers, self.keys, self.queries, name=self.title,
                                 axis_labels=self.axis_labels, layer=layer, head=head)  # fmt: skip


def check_vectors(view_id: str, layers: list[Tensor], vectors: list[tuple[Tensor, Tensor]]) -> None:
    """Refuse query/key ``vectors`` that do not match the weights ``layers`` they explain."""
    if len(vectors) != len(layers):
        raise ValueError(
            f"{view_id!r} has {len(layers)} layers but {len(vectors)} (query, key) vector pairs"
        )
    for index, ((q, k), weights) in enumerate(zip(vectors, layers, strict=True)):
        h, tq, tk = weights.shape
        if q.dim() != 3 or k.dim() != 3 or tuple(q.shape[:2]) != (h, tq) or k.size(1) != tk:
            raise ValueError(
                f"layer {index} of {view_id!r}: query vectors {tuple(q.shape)} and key vectors "
                f"{tuple(k.shape)} do not fit weights {tuple(weights.shape)}; expected "
                f"({h}, {tq}, Dk) and (Hkv, {tk}, Dk)"
            )
        if q.size(2) != k.size(2) or h % k.size(0):
            raise ValueError(
                f"layer {index} of {view_id!r}: key vectors {tuple(k.shape)} do not serve "
                f"{h} query heads of width {q.size(2)}"
            )


def encoder_views(
    tokens: list[str], layers: list[Tensor], vectors: list[tuple[Tensor, Tensor]] | None = None
) -> list[TokenView]:
    """An encoder's self-attention over ``tokens`` as one view (none for an encoder without
    attention layers, such as a BiLSTM without its self-attention layer); ``vectors``: its
    query and key vectors (:attr:`TokenView.vectors`)."""
    if not layers:
        return []
    return [
        TokenView(
            "encoder", "encoder self-attention", tokens, tokens, layers, True, ("key", "query"),
            vectors,
        )
    ]  # fmt: skip


@dataclass(frozen=True)
class MapGroup:
    """Named ``(label, (gh, gw) grid)`` maps over one image."""

    name: str
    maps: list[tuple[str, Tensor]]


@dataclass(frozen=True)
class ImageView(_Drawn):
    """Attention over an image ``uint8 (C, H, W)``: groups of maps that each cover the whole
    image in equal cells. ``layered``: the first ``summaries`` groups sum the model up (a ViT's
    rollout, and its flow) and group ``summaries + l`` is layer ``l``, its head mean first and
    then each head."""

    id: str
    title: str
    image: Tensor
    groups: list[MapGroup]
    layered: bool = False
    summaries: int = 1

    def __post_init__(self) -> None:
        if self.layered and not 0 <= self.summaries <= len(self.groups):
            raise ValueError(f"{self.id!r}: summaries={self.summaries} of {len(self.groups)}")

    @property
    def layers(self) -> int:
        return len(self.groups) - self.summaries if self.layered else 0

    def figure(self, *, layer: int | None = None, head: int | None = None) -> Figure:
        """The image and, for a layered view, the map of ``layer`` (default: the last) and
        ``head`` (default: the head mean); otherwise every map (``layer`` and ``head`` are
        refused: there are none to choose)."""
        from qkv.viz.attention_views import image_view_figure

        groups = [(group.name, group.maps) for group in self.groups]
        return image_view_figure(self.image, groups, name=self.title, layered=self.layered,
                                 summaries=self.summaries, layer=layer, head=head)  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """A model's output on one input and its attention.

    Attributes:
        output: JSON-ready values; ``output["summary"]`` is the one line the CLI prints.
        views: the attention, the one a plot draws first.
        subject: what the views' tokens are of, in messages ("the translation").
    """

    output: dict[str, Any]
    views: list[TokenView | ImageView]
    subject: str = "the text"

    @property
    def summary(self) -> str:
        return str(self.output["summary"])

    def view(self, view: int | str = 0) -> TokenView | ImageView:
        """The view at index ``view`` or with id ``view``; anything else is refused, naming
        the views there are."""
        ids = [v.id for v in self.views]
        if isinstance(view, str) and view in ids:
            return self.views[ids.index(view)]
        if isinstance(view, int) and not isinstance(view, bool) and -len(ids) <= view < len(ids):
            return self.views[view]
        raise ValueError(
            f"no view {view!r} of {self.subject}: pass an index below {len(ids)} or one of {ids}"
            if ids
            else f"{self.subject} has no attention views"
        )

    def figure(
        self, *, view: int | str = 0, layer: int | None = None, head: int | None = None
    ) -> Figure:
        """:meth:`TokenView.figure` or :meth:`ImageView.figure` of :meth:`view`."""
        return self.view(view).figure(layer=layer, head=head)

    def save(
        self,
        path: str | Path,
        *,
        view: int | str = 0,
        layer: int | None = None,
        head: int | None = None,
        format: str | None = None,
    ) -> Path:
        """Draw :meth:`view` (the first by default) to ``path`` (.png, .svg or .pdf, or
        ``format`` for ``-``): one layer (default: the last), one head or the mean of the
        heads (default), titled with the view, the layer and the head. Returns ``path``."""
        return self.view(view).save(path, layer=layer, head=head, format=format)

    def html(self) -> str:
        """The output and every view as one self-contained notebook display: the explorer's
        page in a sandboxed frame, loading nothing from the network (:mod:`qkv.viz.notebook`)."""
        from qkv.viz.notebook import inline_html
        from qkv.viz.view_json import views_json

        result = {"output": self.output, "views": views_json(self.views)}
        return inline_html(result, title=f"qkv attention: {self.summary}")

    def _repr_html_(self) -> str:  # Jupyter, JupyterLab and VS Code show this inline
        return self.html()

    def compare(self, other: Seen, *, names: tuple[str, str] = ("A", "B")) -> Compared:
        """This result (A) and ``other`` (B) side by side with their difference B - A, views
        paired by id (:func:`qkv.viz.compare.compare_views`: what it refuses and lists)."""
        from qkv.viz.compare import compare_views

        return compare_views(self.views, other.views, outputs=(self.output, other.output),
                             names=names)  # fmt: skip

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The inline display, with a line of text for front ends that show no HTML."""
        return {"text/html": self.html(), "text/plain": self.describe()}

    def describe(self) -> str:
        """One line: the summary and each view's id, kind and size."""
        views = [
            f"{v.id} ({len(v.layers)} layers x {v.layers[0].size(0) if v.layers else 0} heads, "
            f"{len(v.queries)} x {len(v.keys)})"
            if isinstance(v, TokenView)
            else f"{v.id} (image, {len(v.groups)} groups)"
            for v in self.views
        ]
        return f"Seen({self.summary!r}; views: {', '.join(views) or 'none'})"


class Runner(Protocol):
    """A trained model directory, loaded: what ``qkv evaluate``, ``qkv plot-attention`` and the
    explorer call. Text runners also count tokens (``token_count(text)``) so that limits are
    checked before a model runs; image runners decode uploads (``decode_upload``)."""

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report: ...

    def views(self, item: Any, options: ViewOptions | None = None) -> Seen: ...


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

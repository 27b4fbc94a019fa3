"""What a runner's ``views(item)`` returns: :class:`Seen`, its output on one input with the
attention views ``qkv plot-attention`` draws, the explorer sends and a notebook displays inline:
:class:`TokenView` (token to token, ``(H, Tq, Tk)`` per layer) and :class:`ImageView` (maps over
an image, in :class:`MapGroup` s). Each view draws itself as a matplotlib figure (``figure``,
``save``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor

from qkv.tasks.view_checks import check_vectors

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from qkv.viz.compare import Compared

__all__ = ["ImageView", "MapGroup", "Seen", "TokenView"]


class _Drawn:
    """What a view saves: its :meth:`figure` (``layer`` / ``head`` / ``words``, see there) to a
    file."""

    def figure(
        self, *, layer: int | None = None, head: int | None = None, words: bool = False
    ) -> Figure:
        raise NotImplementedError

    def save(
        self,
        path: str | Path,
        *,
        layer: int | None = None,
        head: int | None = None,
        format: str | None = None,
        words: bool = False,
    ) -> Path:
        """Draw :meth:`figure` to ``path`` as PNG, SVG or PDF by its suffix (or ``format``,
        for ``-``: standard output), whole or not at all; the format is checked first."""
        from qkv.viz.figure_file import figure_format, save_figure

        kind = figure_format(path, format)
        return save_figure(self.figure(layer=layer, head=head, words=words), path, format=kind)


@dataclass(frozen=True)
class TokenView(_Drawn):
    """Token-to-token attention: one ``(H, Tq, Tk)`` tensor per layer; ``self_attention`` when
    queries and keys are one sequence; ``axes``: the plot's (keys, queries) axis names
    (default: key and query for self-attention, source and target otherwise); ``vectors``
    (with :attr:`.ViewOptions.neuron`): per layer the query vectors ``(H, Tq, Dk)`` and key
    vectors ``(Hkv, Tk, Dk)`` the weights were computed from (the neuron view); ``marks``: a
    self-attention view's label of each token (a tagger's entity type or tag, ``""`` for none;
    :mod:`qkv.viz.marks`), drawn with the tokens."""

    id: str
    title: str
    queries: list[str]
    keys: list[str]
    layers: list[Tensor]
    self_attention: bool
    axes: tuple[str, str] | None = None
    vectors: list[tuple[Tensor, Tensor]] | None = None
    marks: list[str] | None = None

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
        if self.marks is not None:
            from qkv.viz.marks import check_marks

            check_marks(self.id, self.marks, self.queries, self.keys,
                        self_attention=self.self_attention)  # fmt: skip

    @property
    def axis_labels(self) -> tuple[str, str]:
        if self.axes is not None:
            return self.axes
        return ("key", "query") if self.self_attention else ("source", "target")

    def figure(
        self, *, layer: int | None = None, head: int | None = None, words: bool = False
    ) -> Figure:
        """The heatmap of ``layer`` (default: the last; negative: from the end) and ``head``
        (default: the mean of the heads), titled with :attr:`title`, the layer and the head,
        its axes named by :attr:`axis_labels`, with a colour bar; each token labelled with its
        mark, if any (``"Paul [person]"``). ``words``: subword pieces merged into words, as the
        page's words toggle does, the title saying so (tokens without subword markers are
        refused)."""
        from qkv.viz.attention_views import token_view_figure

        return token_view_figure(self.layers, self.keys, self.queries, name=self.title,
                                 axis_labels=self.axis_labels, layer=layer, head=head,
                                 marks=self.marks, words=words)  # fmt: skip


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

    def figure(
        self, *, layer: int | None = None, head: int | None = None, words: bool = False
    ) -> Figure:
        """The image and, for a layered view, the map of ``layer`` (default: the last) and
        ``head`` (default: the head mean); otherwise every map (``layer`` and ``head`` are
        refused: there are none to choose). ``words=True`` is refused: an image has no pieces."""
        from qkv.viz.attention_views import image_view_figure

        if words:
            raise ValueError(f"{self.title} is over an image: no pieces to merge; pass words=False")

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
        self,
        *,
        view: int | str = 0,
        layer: int | None = None,
        head: int | None = None,
        words: bool = False,
    ) -> Figure:
        """:meth:`TokenView.figure` or :meth:`ImageView.figure` of :meth:`view`."""
        return self.view(view).figure(layer=layer, head=head, words=words)

    def save(
        self,
        path: str | Path,
        *,
        view: int | str = 0,
        layer: int | None = None,
        head: int | None = None,
        format: str | None = None,
        words: bool = False,
    ) -> Path:
        """Draw :meth:`view` (the first by default) to ``path`` (.png, .svg or .pdf, or
        ``format`` for ``-``): one layer (default: the last), one head or the mean of the
        heads (default), titled with the view, the layer and the head; ``words``: subword
        pieces merged into words (:meth:`TokenView.figure`). Returns ``path``."""
        return self.view(view).save(path, layer=layer, head=head, format=format, words=words)

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

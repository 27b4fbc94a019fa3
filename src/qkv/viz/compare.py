"""Two results' attention side by side, with the signed difference B - A: what the attention
page's compare mode draws (``Seen.compare``, ``qkv explore --compare``).

Views are paired by id. A pair of token views must be of the same tokens (queries and keys) and
of the same number of layers and heads, or it is refused (a difference of weights over different
tokens means nothing). A pair of image views must be of the same image, with the same groups and
maps (group names and map labels: a ViT's layers and heads, a caption's words) over the same
grid of cells; each map's difference is ``B - A`` over that grid. A view that only one result
has, or a token view paired with an image view, is listed in ``unpaired`` with the reason, never
dropped silently. The difference is computed here from the tensors, ``B - A`` per layer
``(H, Tq, Tk)`` (or per map ``(gh, gw)``), then rounded like the weights; the page takes the head
mean of the difference as the difference of the head means (the mean is linear).

The page's data (:mod:`qkv.viz.page`)::

    {"mode": "compare", "names": [A, B], "outputs": [output A, output B],
     "pairs": [{"id", "title", "self", "queries", "keys", "a": L x H x Tq x Tk,
                "b": ..., "diff": ...}, ...,
               {"type": "image", "id", "title", "image", "width", "height",
                "groups": [{"name", "maps": [{"label", "a": gh x gw, "b", "diff"}]}]}, ...],
     "unpaired": [{"id", "title", "in": [names holding it], "reason"}, ...]}

Views are taken by their fields (``id``, ``title``, ``queries``, ``keys``, ``layers``,
``self_attention``; an image view's ``image`` and ``groups``), as
:func:`qkv.viz.view_json.views_json` takes them: this layer is below the tasks and does not
import them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from qkv.viz.view_json import image_view, rounded


def first_difference(a: Sequence[str], b: Sequence[str], names: tuple[str, str]) -> str:
    """Where two token sequences part: ``"position 3: 'cat' in A, 'dog' in B"``."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"position {index}: {x!r} in {names[0]}, {y!r} in {names[1]}"
    index = min(len(a), len(b))
    name, extra = (names[0], a) if len(a) > len(b) else (names[1], b)
    return f"position {index}: {extra[index]!r} in {name}, nothing in the other"


SAME_TOKENS = (
    "the same input with the same tokens (for a model that writes text, have one read the "
    "other's output: views(x, ViewOptions(target=first.output['text'])))"
)


def check_tokens(view_id: str, what: str, a: Sequence[str], b: Sequence[str],
                 names: tuple[str, str], *, unit: str = "tokens",
                 advice: str = SAME_TOKENS) -> None:  # fmt: skip
    """Refuse two token sequences (or map labels) that differ, naming both lengths and the
    first difference."""
    if list(a) == list(b):
        return
    raise ValueError(
        f"view {view_id!r}: the {what} differ ({names[0]} has {len(a)} {unit}, {names[1]} has "
        f"{len(b)}; first difference at {first_difference(a, b, names)}); compare results of "
        f"{advice}"
    )


def difference(view_id: str, a: Sequence[Tensor], b: Sequence[Tensor],
               names: tuple[str, str]) -> list[Tensor]:  # fmt: skip
    """``B - A`` per layer, ``(H, Tq, Tk)`` each; different layer or head counts are refused."""
    shapes = [tuple(w.shape) for w in a], [tuple(w.shape) for w in b]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"view {view_id!r}: {names[0]} has {len(a)} layers of {shapes[0][:1]} and "
            f"{names[1]} has {len(b)} layers of {shapes[1][:1]} (H, Tq, Tk); compare models "
            "with the same number of layers and heads"
        )
    return [wb.detach().double() - wa.detach().double() for wa, wb in zip(a, b, strict=True)]


def pair_json(a: Any, b: Any, names: tuple[str, str]) -> dict[str, Any]:
    """One paired token view: both weights and their difference ``B - A``."""
    check_tokens(a.id, "queries", a.queries, b.queries, names)
    check_tokens(a.id, "keys", a.keys, b.keys, names)
    diff = difference(a.id, a.layers, b.layers, names)
    return {
        "id": a.id,
        "title": a.title,
        "self": bool(a.self_attention),
        "queries": list(a.queries),
        "keys": list(a.keys),
        "a": [rounded(w) for w in a.layers],
        "b": [rounded(w) for w in b.layers],
        "diff": [rounded(d) for d in diff],
    }


def image_pair_json(a: Any, b: Any, names: tuple[str, str]) -> dict[str, Any]:
    """One paired image view: each map of both and its difference ``B - A`` ``(gh, gw)``; a
    different image, different groups or maps, or a different grid are refused."""
    if a.image.shape != b.image.shape or not bool((a.image == b.image).all()):
        raise ValueError(
            f"view {a.id!r}: {names[0]} and {names[1]} are of different images "
            f"({tuple(a.image.shape)} and {tuple(b.image.shape)} (C, H, W)); compare results "
            "of the same image"
        )
    labels_a = [f"{g.name}: {label}" for g in a.groups for label, _ in g.maps]
    labels_b = [f"{g.name}: {label}" for g in b.groups for label, _ in g.maps]
    check_tokens(a.id, "maps", labels_a, labels_b, names, unit="maps",
                 advice="models with the same layers and heads (for a captioner, the same "
                 "caption)")  # fmt: skip
    groups = []
    for group_a, group_b in zip(a.groups, b.groups, strict=True):
        maps = []
        for (label, grid_a), (_, grid_b) in zip(group_a.maps, group_b.maps, strict=True):
            if grid_a.shape != grid_b.shape:
                raise ValueError(
                    f"view {a.id!r}, map {group_a.name}: {label}: {names[0]}'s grid is "
                    f"{tuple(grid_a.shape)} and {names[1]}'s {tuple(grid_b.shape)} (gh, gw); "
                    "compare models with the same patches"
                )
            diff = grid_b.detach().double() - grid_a.detach().double()  # (gh, gw)
            maps.append({"label": label, "a": rounded(grid_a), "b": rounded(grid_b),
                         "diff": rounded(diff)})  # fmt: skip
        groups.append({"name": group_a.name, "maps": maps})
    return {**image_view(a.id, a.title, a.image, []), "groups": groups}


@dataclass(frozen=True)
class Compared:
    """Two results compared: the page's data (:attr:`data`); displays inline in a notebook
    (an iframe of the attention page in compare mode) and writes a page (:meth:`page`)."""

    data: dict[str, Any]

    @property
    def unpaired(self) -> list[dict[str, Any]]:
        """The views not compared, each with the names of the results holding it and why."""
        return list(self.data["unpaired"])

    def html(self) -> str:
        """The comparison as one notebook display (a sandboxed frame, no network)."""
        from qkv.viz.notebook import compare_height, inline_document, inline_frame

        a, b = self.data["names"]
        return inline_frame(inline_document(self.data), compare_height(self.data),
                            title=f"qkv attention: {a} vs {b}")  # fmt: skip

    def page(self) -> str:
        """The comparison as a self-contained HTML file (``qkv explore --compare``)."""
        from qkv.viz.page import render_page

        return render_page(self.data)

    def _repr_html_(self) -> str:  # Jupyter, JupyterLab and VS Code show this inline
        return self.html()

    def describe(self) -> str:
        a, b = self.data["names"]
        pairs = ", ".join(p["id"] for p in self.data["pairs"]) or "none"
        left = ", ".join(u["id"] for u in self.data["unpaired"]) or "none"
        return f"Compared({a} vs {b}; views: {pairs}; not compared: {left})"

    def __repr__(self) -> str:
        return self.describe()


def compare_views(
    views_a: Sequence[Any],
    views_b: Sequence[Any],
    *,
    outputs: tuple[dict[str, Any], dict[str, Any]],
    names: tuple[str, str] = ("A", "B"),
) -> Compared:
    """Pair ``views_a`` and ``views_b`` by id and compare each pair of token views, and each
    pair of image views.

    Raises:
        ValueError: ``names`` not two distinct non-empty strings; a pair whose tokens, layers
            or heads differ, or whose images, maps or grids differ (naming both).
    """
    names = tuple(names)  # type: ignore[assignment]
    if len(names) != 2 or not all(isinstance(n, str) and n for n in names) or names[0] == names[1]:
        raise ValueError(f"names must be two distinct non-empty strings, got {names!r}")
    by_id = {v.id: v for v in views_b}
    pairs, unpaired = [], []
    for a in views_a:
        b = by_id.get(a.id)
        if b is None:
            unpaired.append({"id": a.id, "title": a.title, "in": [names[0]],
                             "reason": f"only {names[0]} has this view"})  # fmt: skip
        elif hasattr(a, "queries") and hasattr(b, "queries"):
            pairs.append(pair_json(a, b, names))
        elif hasattr(a, "groups") and hasattr(b, "groups"):
            pairs.append(image_pair_json(a, b, names))
        else:
            reason = "a token view and an image view are not compared"
            unpaired.append({"id": a.id, "title": a.title, "in": list(names),
                             "reason": reason})  # fmt: skip
    ids_a = {v.id for v in views_a}
    unpaired += [{"id": b.id, "title": b.title, "in": [names[1]],
                  "reason": f"only {names[1]} has this view"}
                 for b in views_b if b.id not in ids_a]  # fmt: skip
    return Compared({"mode": "compare", "names": list(names), "outputs": list(outputs),
                     "pairs": pairs, "unpaired": unpaired})  # fmt: skip

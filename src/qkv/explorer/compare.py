"""Two loaded models on one input, compared (``qkv explore --model A --compare B``): each runs
as the explorer runs it (:meth:`qkv.explorer.session.ExplorerModel.seen`), and their results
are paired view by view (:func:`qkv.viz.compare.compare_views`, through ``Seen.compare``)."""

from __future__ import annotations

from typing import Any

from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import Limits
from qkv.viz.compare import Compared


def compare_models(models: ExplorerModels, *, limits: Limits, **given: Any) -> Compared:
    """Run the two ``models`` (A, then B) on the input ``given`` (``text`` or ``image`` and
    ``image_name``, ``max_new_tokens``: what :meth:`ExplorerModel.run` takes) and compare
    their attention, named by the models' names.

    Raises:
        ValueError: not two models, or two of different tasks; what ``Seen.compare`` refuses.
        InputError: the input does not suit the models or the limits.
    """
    if len(models) != 2:
        raise ValueError(f"a comparison takes two models, got {len(models)}")
    a, b = models
    if a.kind != b.kind:
        raise ValueError(
            f"{a.directory} holds a {a.spec.label} and {b.directory} a {b.spec.label}; compare "
            "two models of one task (two runs, or a run and one of its snapshots)"
        )
    seen_a, _ = a.seen(limits=limits, **given)
    seen_b, _ = b.seen(limits=limits, **given)
    return seen_a.compare(seen_b, names=(a.name, b.name))

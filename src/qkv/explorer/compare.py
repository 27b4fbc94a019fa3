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
    ``image_name``, ``max_new_tokens``: what :meth:`.ExplorerModel.run` takes) and compare
    their attention, named by the models' names. A model that writes text (a translator, a
    summariser, a language model's continuation) may write something else than the other:
    B then runs again reading A's output (:attr:`~qkv.tasks.spec.ViewOptions.target`), so that both
    attend over the same tokens (and A too, when its text reads back as other tokens than it
    wrote; each result's summary says when its output was read, not written).

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
    written = seen_a.output.get("text") if getattr(b.runner, "takes_target", False) else None
    target = written if isinstance(written, str) and written.strip() else None
    seen_b, _ = b.seen(limits=limits, **given)
    if target is None or seen_b.output.get("text") == written:
        return seen_a.compare(seen_b, names=(a.name, b.name))
    seen_b, _ = b.seen(limits=limits, target=target, **given)
    try:
        return seen_a.compare(seen_b, names=(a.name, b.name))
    except ValueError:  # told apart below: if A reading its own text still differs, it raises
        pass
    # A's own tokens were not the ones its text reads back as (a subword split that decoding
    # chose but the tokenizer would not): A reads its output as B did.
    seen_a, _ = a.seen(limits=limits, target=target, **given)
    return seen_a.compare(seen_b, names=(a.name, b.name))

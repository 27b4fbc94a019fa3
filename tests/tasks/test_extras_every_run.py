"""No runner ignores what a view asks for: for the old run of every task
(``tests/fixtures/runs``), ``views(input, ViewOptions(neuron=True))`` returns query and key
vectors on at least one view or raises a ``ValueError`` that says to leave ``neuron`` out, and
so for ``rollout``, called on the runner directly (not only through the explorer). Which tasks
show which is pinned, so that a runner that stops showing one fails here too; and what a runner
says it shows without running (``runner.extras()``, what the explorer offers) is what its views
do show."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from qkv.tasks.registry import TASKS
from qkv.tasks.run_dir import load_runner
from qkv.tasks.seen import ImageView, TokenView
from qkv.tasks.spec import ViewOptions
from qkv.tasks.view_extras import EXTRAS

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
# The fixture runs' models: Transformers for translation and dialogue, a Bahdanau RNN
# summariser, a show-attend-tell captioner, a cloze reader, a ViT (its rollout is always its
# image view's first group; rollout=True adds the flow group after it).
SHOWN = {
    "neuron": {"translation", "dialogue", "language_model", "classification", "tagging", "ner"},
    "rollout": {"classification", "tagging", "ner", "image_classification"},
}

pytestmark = pytest.mark.usefixtures("one_thread")


@functools.cache
def _run(name: str) -> tuple[Any, Any]:
    """The run's runner and its input (read once per test process)."""
    expected = json.loads((RUNS / f"{name}.expected.json").read_text(encoding="utf-8"))
    spec, runner = load_runner(RUNS / name)
    item = expected["input"]
    return runner, runner.read_image(RUNS / item) if spec.input == "image" else item


def _shows(views: list, extra: str) -> bool:
    tokens = [v for v in views if isinstance(v, TokenView)]
    if extra == "neuron":
        return any(v.vectors is not None for v in tokens)
    groups = [g.name for v in views if isinstance(v, ImageView) for g in v.groups]
    return any(v.id == "rollout" for v in tokens) or "flow" in groups


@pytest.mark.parametrize("extra", ["neuron", "rollout"])
@pytest.mark.parametrize("name", list(TASKS))
def test_views_show_the_extra_or_refuse_it(name, extra):
    runner, item = _run(name)
    options = ViewOptions(**{extra: True})
    if name in SHOWN[extra]:
        assert _shows(runner.views(item, options).views, extra)
        assert not _shows(runner.views(item).views, extra)  # opt-in
    else:
        with pytest.raises(ValueError, match=f"leave out {extra}"):
            runner.views(item, options)


@pytest.mark.parametrize("name", list(TASKS))
def test_extras_said_without_running_are_those_the_views_show(name):
    runner, item = _run(name)
    shown = set()
    for extra in EXTRAS:
        try:
            views = runner.views(item, ViewOptions(**{extra: True})).views
        except ValueError as error:
            assert f"leave out {extra}" in str(error)
            continue
        assert _shows(views, extra)
        shown.add(extra)
    assert runner.extras() == shown

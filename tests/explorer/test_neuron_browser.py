"""The page's neuron view in a real browser (headless Chromium through Playwright, offline): a
click on a matrix cell shows that query and key's vectors as one bar per dimension, and the
score sum(q * k), the scaled score and the weight, equal to those computed here from the page's
data (which tests/tasks/test_view_extras.py checks against neuron_view)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from qkv.tasks.classification.runner import Classifier
from qkv.tasks.spec import ViewOptions
from qkv.viz.view_json import views_json
from tests.explorer.test_export_browser import open_result, page  # noqa: F401

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"


@pytest.mark.parametrize("cell", [(1, 3), (4, 0)])
def test_a_clicked_cell_shows_its_query_key_and_weight(page, tmp_path, cell):  # noqa: F811
    runner = Classifier.load(RUNS / "classification")
    (data,) = views_json(runner.views("a good film about the sea", ViewOptions(neuron=True)).views)
    open_result(page, tmp_path, [data])
    view = page.locator('.view[data-view-id="encoder"]')
    box = view.locator("canvas.matrix-canvas").bounding_box()
    i, j = cell
    n = len(data["queries"])
    page.mouse.click(
        box["x"] + (j + 0.5) * box["width"] / n, box["y"] + (i + 0.5) * box["height"] / n
    )
    panel = view.locator(".neuron-view")
    assert panel.get_attribute("data-q") == str(i) and panel.get_attribute("data-k") == str(j)
    assert panel.get_attribute("data-layer") == "0" and panel.get_attribute("data-head") == "0"
    q = data["neuron"]["q"][0][0][i]
    k = data["neuron"]["k"][0][0][j]
    score = sum(a * b for a, b in zip(q, k, strict=True))
    value = lambda cls: float(panel.locator(cls).get_attribute("data-value"))  # noqa: E731
    assert value(".neuron-score") == pytest.approx(score, abs=1e-9)
    assert value(".neuron-scaled") == pytest.approx(score / math.sqrt(len(q)), abs=1e-9)
    assert value(".neuron-weight") == data["layers"][0][0][i][j]
    for kind, expected in [("q", q), ("k", k), ("qk", [a * b for a, b in zip(q, k, strict=True)])]:
        bars = panel.locator(f'.neuron-bars[data-kind="{kind}"] .neuron-bar')
        assert bars.count() == len(q)
        shown = [float(bars.nth(d).get_attribute("data-value")) for d in range(len(q))]
        assert shown == pytest.approx(expected, abs=1e-9)


def test_choosing_another_head_in_the_panel(page, tmp_path):  # noqa: F811
    runner = Classifier.load(RUNS / "classification")
    (data,) = views_json(runner.views("the sea", ViewOptions(neuron=True)).views)
    open_result(page, tmp_path, [data])
    panel = page.locator(".neuron-view")
    panel.locator(".neuron-head").select_option("1")
    panel.locator(".neuron-query").select_option("2")
    assert panel.get_attribute("data-head") == "1"
    assert (
        float(panel.locator(".neuron-weight").get_attribute("data-value"))
        == (data["layers"][0][1][2][0])
    )


def test_a_view_without_vectors_has_no_panel(page, tmp_path):  # noqa: F811
    runner = Classifier.load(RUNS / "classification")
    (data,) = views_json(runner.views("the sea").views)
    open_result(page, tmp_path, [data])
    assert page.locator(".neuron-view").count() == 0

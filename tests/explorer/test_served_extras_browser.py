"""The served page's extras in a real browser (headless Chromium): the "neuron view" and
"rollout / flow" checkboxes are enabled only for a model whose ``extras`` (``GET /api/models``)
names them, their state goes with the run, and a translation run with "neuron view" checked
shows the neuron panel of a clicked cell, its bars the query and key vectors the API answers."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.explorer.test_browser import digit_png, model_dirs, server, watched  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def _enabled(page) -> dict[str, bool]:
    return {name: page.is_enabled(f"#extra-{name}") for name in ("neuron", "rollout")}


def test_the_checkboxes_follow_the_models_extras(watched, server):  # noqa: F811
    page = watched.page
    page.goto(server)
    page.wait_for_selector("#app[data-state=ready]")
    offered = {m["name"]: m["extras"] for m in httpx.get(server + "api/models").json()["models"]}
    assert offered["caption-digits"] == [] and offered["vit-digits"] == ["rollout"]
    for name, extras in offered.items():
        page.select_option("#model-select", name)
        assert _enabled(page) == {"neuron": "neuron" in extras, "rollout": "rollout" in extras}
    # A box checked for one model is not sent for a model that cannot show it.
    page.select_option("#model-select", "reverse")
    page.check("#extra-neuron")
    page.select_option("#model-select", "caption-digits")
    page.set_input_files(
        "#image-input",
        files=[{"name": "strip.png", "mimeType": "image/png", "buffer": digit_png(1, 2)}],
    )
    page.wait_for_selector("#image-preview:visible")
    with page.expect_request("**/api/run") as request:
        page.click("#run-button")
    assert not {"neuron", "rollout"} & set(json.loads(request.value.post_data))
    page.wait_for_selector("#app[data-state=done]")


def test_a_translation_with_the_neuron_view_shows_a_clicked_cells_vectors(watched, server):  # noqa: F811
    page = watched.page
    page.goto(server)
    page.select_option("#model-select", "reverse")
    page.fill("#text-input", "c a b d")
    page.check("#extra-neuron")
    with page.expect_request("**/api/run") as request:
        page.click("#run-button")
    assert json.loads(request.value.post_data) == {
        "model": "reverse", "text": "c a b d", "neuron": True
    }  # fmt: skip
    page.wait_for_selector("#app[data-state=done]")
    answer = httpx.post(server + "api/run", json={"model": "reverse", "text": "c a b d",
                                                  "neuron": True}).json()  # fmt: skip
    (cross,) = [v for v in answer["views"] if v["id"] == "cross"]
    view = page.locator('.view[data-view-id="cross"]')
    assert view.locator(".neuron-view").count() == 1
    box = view.locator("canvas.matrix-canvas").bounding_box()
    i, j = 1, 2
    rows, cols = len(cross["queries"]), len(cross["keys"])
    page.mouse.click(
        box["x"] + (j + 0.5) * box["width"] / cols, box["y"] + (i + 0.5) * box["height"] / rows
    )
    panel = view.locator(".neuron-view")
    assert (panel.get_attribute("data-q"), panel.get_attribute("data-k")) == (str(i), str(j))
    layer = int(panel.get_attribute("data-layer"))
    head = int(panel.get_attribute("data-head"))
    q = cross["neuron"]["q"][layer][head][i]
    k = cross["neuron"]["k"][layer][head][j]
    for kind, expected in [("q", q), ("k", k)]:
        bars = panel.locator(f'.neuron-bars[data-kind="{kind}"] .neuron-bar')
        assert bars.count() == len(q) > 0
        shown = [float(bars.nth(d).get_attribute("data-value")) for d in range(len(q))]
        assert shown == pytest.approx(expected, abs=1e-9)
    # Unchecked, the same run carries no vectors and the page shows no panel.
    page.uncheck("#extra-neuron")
    page.click("#run-button")
    page.wait_for_selector("#app[data-state=done]")
    assert page.locator(".neuron-view").count() == 0

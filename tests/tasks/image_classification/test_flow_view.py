"""A ViT's [CLS] attention flow on request (``ViewOptions(rollout=True)``): a "flow" map group
next to the rollout, a distribution over the patches equal to the [CLS] row of the full flow
matrix; off by default; one layer makes it the rollout itself (flow and rollout both read
``A_1``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from qkv.attention.flow import attention_flow
from qkv.models.vit import ViT
from qkv.tasks.image_classification.runner import ImageClassifier, to_model_input
from qkv.tasks.seen import ImageView
from qkv.tasks.spec import ViewOptions
from qkv.tasks.view_extras import check_extras

pytestmark = pytest.mark.usefixtures("one_thread")

RUNS = Path(__file__).parents[2] / "fixtures" / "runs"


@pytest.fixture(scope="module")
def fixture_vit() -> ImageClassifier:
    return ImageClassifier.load(RUNS / "image_classification")


def _image(vit: ImageClassifier) -> torch.Tensor:
    return vit.read_image(RUNS / "data" / "image_classification" / "digits1.png")  # (1, 8, 8)


def _view(vit: ImageClassifier, options: ViewOptions | None) -> ImageView:
    seen = vit.views(_image(vit), options)
    if options is not None:
        check_extras(seen, options)  # the request is served, not refused as "no rollout view"
    (view,) = seen.views
    assert isinstance(view, ImageView)
    return view


def test_flow_is_off_by_default(fixture_vit):
    for options in (None, ViewOptions()):
        view = _view(fixture_vit, options)
        assert [g.name for g in view.groups] == ["rollout", "layer 0"]
        assert view.layers == 1


def test_one_layer_flow_is_the_rollout(fixture_vit):
    view = _view(fixture_vit, ViewOptions(rollout=True))
    assert [g.name for g in view.groups] == ["rollout", "flow", "layer 0"]
    assert (view.layers, view.summaries) == (1, 2)
    (_, rollout), (_, flow) = view.groups[0].maps[0], view.groups[1].maps[0]
    assert flow.shape == (4, 4)  # 4 x 4 patches of 2 pixels
    torch.testing.assert_close(flow, rollout)


def test_flow_map_is_the_cls_row_of_the_full_flow_over_the_patches(fixture_vit):
    # Three layers of random weights: flow now differs from rollout.
    torch.manual_seed(0)
    config = dataclasses.replace(fixture_vit.model.config, num_layers=3)
    vit = ImageClassifier(ViT(config), fixture_vit.labels, fixture_vit.config)
    view = _view(vit, ViewOptions(rollout=True))
    assert [g.name for g in view.groups] == ["rollout", "flow", "layer 0", "layer 1", "layer 2"]
    assert view.layers == 3
    flow = view.groups[1].maps[0][1]  # (gh, gw)
    assert float(flow.sum()) == pytest.approx(1.0, abs=1e-5)
    assert bool((flow >= 0).all())
    with torch.inference_mode():
        weights = vit.model(to_model_input(_image(vit)[None]), need_weights=True).attentions
    full = attention_flow(weights)[0, 0, 1:]  # (P,): [CLS]'s row of all N^2 problems
    torch.testing.assert_close(flow.flatten(), full / full.sum())
    assert not torch.allclose(flow, view.groups[0].maps[0][1], atol=1e-3)  # not the rollout
    # the layer maps keep their place after the two summary groups
    figure = view.figure(layer=2, head=1)
    titles = [ax.get_title() for ax in figure.axes] + [figure.get_suptitle()]
    assert any("layer 2" in t and "head 1" in t for t in titles if t), titles

"""Comparing two results' attention (``Seen.compare``, :mod:`qkv.viz.compare`): the difference
the page draws equals B - A computed here from the two Seens' tensors (a saved run against a
copy of it with perturbed weights, as two snapshots of one run would be); pairs of different
tokens, layers or heads are refused, naming both; a view only one result has is listed; the
display is a sandboxed frame of the page in compare mode that loads nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import qkv
from qkv.tasks.seen import ImageView, MapGroup, Seen, TokenView
from qkv.viz.view_json import DIGITS
from tests.viz.notebook_html import fetched_urls, frames, page_data

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
ROUNDING = 10**-DIGITS + 1e-7  # what rounding A, B and B - A to DIGITS decimals may move

pytestmark = pytest.mark.usefixtures("one_thread")


def perturbed_copy(run: Path, folder: Path, scale: float = 0.05) -> Path:
    """A copy of the model directory ``run`` whose float weights are moved by a little noise."""
    copy = folder / f"{run.name}-perturbed"
    shutil.copytree(run, copy)
    generator = torch.Generator().manual_seed(1)
    tensors = load_file(copy / "model.safetensors")
    for name, tensor in tensors.items():
        if tensor.is_floating_point():
            noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
            tensors[name] = tensor + (scale * noise).to(tensor.dtype)
    save_file(tensors, copy / "model.safetensors")
    return copy


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Seen, Seen]:
    run = RUNS / "classification"
    copy = perturbed_copy(run, tmp_path_factory.mktemp("compare"))
    text = "a great film , truly"
    return qkv.load(run).views(text), qkv.load(copy).views(text)


def test_the_difference_is_b_minus_a_of_the_seens_tensors(two):
    a, b = two
    compared = a.compare(b, names=("final", "perturbed"))
    data = compared.data
    assert data["mode"] == "compare" and data["names"] == ["final", "perturbed"]
    assert [o["summary"] for o in data["outputs"]] == [a.summary, b.summary]
    assert data["unpaired"] == []
    (pair,) = data["pairs"]
    view_a, view_b = a.view(pair["id"]), b.view(pair["id"])
    assert pair["queries"] == view_a.queries and pair["keys"] == view_b.keys
    assert len(pair["diff"]) == len(view_a.layers)
    for layer, (wa, wb) in enumerate(zip(view_a.layers, view_b.layers, strict=True)):
        expected = wb.double() - wa.double()  # (H, Tq, Tk)
        assert expected.abs().max() > 0.01, "the perturbed copy attends differently"
        got = torch.tensor(pair["diff"][layer], dtype=torch.float64)
        torch.testing.assert_close(got, expected, atol=ROUNDING, rtol=0)
        # and the page's A and B are the two Seens' weights, in that order
        torch.testing.assert_close(torch.tensor(pair["a"][layer]).double(), wa.double(),
                                   atol=ROUNDING, rtol=0)  # fmt: skip
        torch.testing.assert_close(torch.tensor(pair["b"][layer]).double(), wb.double(),
                                   atol=ROUNDING, rtol=0)  # fmt: skip


def test_the_display_is_a_frame_of_the_compare_page_that_loads_nothing(two):
    a, b = two
    html = a.compare(b)._repr_html_()
    (frame,) = frames(html)
    assert frame["sandbox"] == "allow-scripts allow-downloads"
    assert fetched_urls(html) == []
    data = page_data(frame["srcdoc"])
    assert data["mode"] == "compare" and data["inline"] is True
    assert data["names"] == ["A", "B"]


def token_seen(views: list, summary: str = "s") -> Seen:
    return Seen({"summary": summary}, views)


def view(view_id: str, queries: list[str], keys: list[str] | None = None, *, layers: int = 1,
         heads: int = 2) -> TokenView:  # fmt: skip
    keys = queries if keys is None else keys
    weights = [torch.softmax(torch.randn(heads, len(queries), len(keys)), -1)] * layers
    return TokenView(view_id, view_id, queries, keys, weights, keys is queries)


def test_a_view_only_one_result_has_is_listed_not_dropped():
    tokens = ["a", "b"]
    maps = [MapGroup("layer 0", [("head mean", torch.ones(2, 2) / 4)])]
    image = ImageView("v", "v", torch.zeros(1, 4, 4, dtype=torch.uint8), maps)
    a = token_seen([view("encoder", tokens), view("cross", tokens, ["x"]), image])
    b = token_seen([view("encoder", tokens), view("decoder", tokens), view("v", tokens)])
    compared = a.compare(b, names=("old", "new"))
    assert [p["id"] for p in compared.data["pairs"]] == ["encoder"]
    listed = {u["id"]: (u["in"], u["reason"]) for u in compared.unpaired}
    assert listed == {
        "cross": (["old"], "only old has this view"),
        "decoder": (["new"], "only new has this view"),
        "v": (["old", "new"], "a token view and an image view are not compared"),
    }
    assert "not compared: cross, v, decoder" in compared.describe()


@pytest.mark.parametrize(
    "views_b, message",
    [
        # a generated translation that differs: lengths and the first differing token named
        ([view("cross", ["the", "dog", "ran"], ["x", "y"])],
         r"the queries differ \(A has 2 tokens, B has 3; first difference at position 1: "
         r"'cat' in A, 'dog' in B\)"),
        ([view("cross", ["the", "cat"], ["x"])],
         r"the keys differ \(A has 2 tokens, B has 1; first difference at position 1: 'y' in "
         r"A, nothing in the other\)"),
        ([view("cross", ["the", "cat"], ["x", "y"], layers=2)],
         r"A has 1 layers of \[\(2, 2, 2\)\] and B has 2 layers"),
        ([view("cross", ["the", "cat"], ["x", "y"], heads=3)],
         r"A has 1 layers of \[\(2, 2, 2\)\] and B has 1 layers of \[\(3, 2, 2\)\]"),
    ],
)  # fmt: skip
def test_a_pair_of_different_tokens_layers_or_heads_is_refused(views_b, message):
    a = token_seen([view("cross", ["the", "cat"], ["x", "y"])])
    with pytest.raises(ValueError, match=message):
        a.compare(token_seen(views_b))


@pytest.mark.parametrize("names", [("A",), ("A", "A"), ("A", ""), ("A", 2), ("A", "B", "C")])
def test_names_must_be_two_distinct_strings(names):
    a = token_seen([view("encoder", ["a"])])
    with pytest.raises(ValueError, match="names must be two distinct non-empty strings"):
        a.compare(a, names=names)


def test_two_vits_image_views_pair_with_each_maps_difference(tmp_path):
    run = RUNS / "image_classification"
    a_runner, b_runner = qkv.load(run), qkv.load(perturbed_copy(run, tmp_path))
    image = a_runner.read_image(RUNS / "data" / "image_classification" / "digits1.png")
    a, b = a_runner.views(image), b_runner.views(image)
    (pair,) = a.compare(b).data["pairs"]
    (view_a,), (view_b,) = a.views, b.views
    assert (
        pair["type"] == "image"
        and pair["id"] == "vit"
        and (pair["width"], pair["height"]) == (8, 8)
    )
    assert [g["name"] for g in pair["groups"]] == [g.name for g in view_a.groups]
    largest = 0.0
    for group, group_a, group_b in zip(pair["groups"], view_a.groups, view_b.groups, strict=True):
        assert [m["label"] for m in group["maps"]] == [label for label, _ in group_a.maps]
        for got, (_, grid_a), (_, grid_b) in zip(group["maps"], group_a.maps, group_b.maps,
                                                 strict=True):  # fmt: skip
            expected = grid_b.double() - grid_a.double()  # (gh, gw)
            largest = max(largest, float(expected.abs().max()))
            for side, want in (("a", grid_a), ("b", grid_b), ("diff", expected)):
                torch.testing.assert_close(torch.tensor(got[side], dtype=torch.float64),
                                           want.double(), atol=ROUNDING, rtol=0)  # fmt: skip
    assert largest > 0.01, "the perturbed copy attends differently"


def image_seen(grids: list[torch.Tensor], labels: list[str] | None = None,
               pixels: int = 0) -> Seen:  # fmt: skip
    labels = labels or [f"head {h}" for h in range(len(grids))]
    group = MapGroup("layer 0", list(zip(labels, grids, strict=True)))
    image = torch.full((1, 4, 4), pixels, dtype=torch.uint8)
    return Seen({"summary": "s"}, [ImageView("vit", "vit", image, [group], layered=False)])


@pytest.mark.parametrize(
    "b, message",
    [
        (image_seen([torch.ones(4, 4)]),
         r"view 'vit', map layer 0: head 0: A's grid is \(2, 2\) and B's \(4, 4\) \(gh, gw\)"),
        (image_seen([torch.ones(2, 2), torch.ones(2, 2)]),
         r"the maps differ \(A has 1 maps, B has 2; first difference at position 1: "
         r"'layer 0: head 1' in B, nothing in the other\); compare results of models with the "
         r"same layers and heads"),
        (image_seen([torch.ones(2, 2)], ["a"]), r"position 0: 'layer 0: head 0' in A, "
         r"'layer 0: a' in B"),
        (image_seen([torch.ones(2, 2)], pixels=9),
         r"A and B are of different images \(\(1, 4, 4\) and \(1, 4, 4\) \(C, H, W\)\)"),
    ],
)  # fmt: skip
def test_a_pair_of_different_images_maps_or_grids_is_refused(b, message):
    with pytest.raises(ValueError, match=message):
        image_seen([torch.ones(2, 2)]).compare(b)

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
from qkv.tasks.spec import ImageView, MapGroup, Seen, TokenView
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
    b = token_seen([view("encoder", tokens), view("decoder", tokens), image])
    compared = a.compare(b, names=("old", "new"))
    assert [p["id"] for p in compared.data["pairs"]] == ["encoder"]
    listed = {u["id"]: (u["in"], u["reason"]) for u in compared.unpaired}
    assert listed == {
        "cross": (["old"], "only old has this view"),
        "decoder": (["new"], "only new has this view"),
        "v": (["old", "new"], "image views are not compared"),
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

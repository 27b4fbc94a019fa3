"""``qkv explore --model DIR --compare DIR2 INPUT -o page.html``: a saved translation run against
a "snapshot" of it (a copy with slightly moved weights, in ``snapshots/5min/`` as training
writes them) gives the compare page, whose difference is the two models' own B - A; when their
translations differ, B reads A's (``ViewOptions.target``) and says so; two models of different
tasks exit 2 with one line and write nothing; each model's views are held to the explorer's
token limit, as one model's page is."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import qkv
from qkv.cli.main import main
from qkv.explorer.compare import compare_models
from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import InputError, Limits
from qkv.tasks.spec import ViewOptions
from qkv.viz.view_json import DIGITS
from tests.viz.test_compare import perturbed_copy

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
DATA = re.compile(r'<script id="qkv-data" type="application/json">(.*?)</script>', re.S)
ROUNDING = 10**-DIGITS + 1e-7

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    """``translation/snapshots/5min``: the fixture run's weights moved a little (the same
    translation of "a b c d", different attention)."""
    folder = tmp_path_factory.mktemp("snapshots")
    return perturbed_copy(RUNS / "translation", folder, scale=0.03).rename(folder / "5min")


def test_explore_compare_writes_the_compare_page(snapshot, tmp_path, capsys):
    out = tmp_path / "compare.html"
    argv = ["explore", "--model", str(RUNS / "translation"), "--compare", str(snapshot)]
    assert main([*argv, "a b c d", "-o", str(out)]) == 0
    data = json.loads(DATA.search(out.read_text(encoding="utf-8")).group(1))
    assert data["mode"] == "compare" and data["names"] == ["translation", "5min"]
    assert {p["id"] for p in data["pairs"]} == {"cross", "encoder", "decoder"}
    assert data["unpaired"] == []
    a = qkv.load(RUNS / "translation").views("a b c d")
    b = qkv.load(snapshot).views("a b c d")
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"translation: {a.summary}", f"5min: {b.summary}", f"wrote {out}"]
    pair = next(p for p in data["pairs"] if p["id"] == "cross")
    expected = b.view("cross").layers[-1].double() - a.view("cross").layers[-1].double()
    assert expected.abs().max() > 0.01
    got = torch.tensor(pair["diff"][-1], dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=ROUNDING, rtol=0)


def test_explore_compare_refuses_another_task(tmp_path, capsys):
    out = tmp_path / "a.html"
    argv = ["explore", "--model", str(RUNS / "translation"), "--compare"]
    assert main([*argv, str(RUNS / "classification"), "a b c d", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "a text classifier; compare two models of one task" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_explore_compare_of_two_translations_has_b_read_a_s(tmp_path, capsys):
    """A model that translates "a b c d" otherwise is shown reading A's translation (teacher
    forced on it), and its line says its output was given; the difference is of those weights."""
    translation = RUNS / "translation"
    far = perturbed_copy(translation, tmp_path, scale=0.1)  # translates "a b c d" differently
    a, b_own = qkv.load(translation).views("a b c d"), qkv.load(far).views("a b c d")
    assert a.output["text"] != b_own.output["text"]
    out = tmp_path / "compare.html"
    argv = ["explore", "--model", str(translation), "--compare", str(far), "a b c d"]
    assert main([*argv, "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith("(given: read, not written by this model)")
    data = json.loads(DATA.search(out.read_text(encoding="utf-8")).group(1))
    read = qkv.load(far).views("a b c d", ViewOptions(target=a.output["text"]))
    a_read = qkv.load(translation).views("a b c d", ViewOptions(target=a.output["text"]))
    first = a if a.view("cross").queries == read.view("cross").queries else a_read
    pair = next(p for p in data["pairs"] if p["id"] == "cross")
    expected = read.view("cross").layers[-1].double() - first.view("cross").layers[-1].double()
    got = torch.tensor(pair["diff"][-1], dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=ROUNDING, rtol=0)


def test_a_comparison_keeps_the_explorers_token_limit_on_each_model(snapshot):
    # "a b c d" is 5 source tokens but its translation 18: only the run tells, and one model's
    # page refuses it over max_tokens=10; a comparison of it (the same run twice) must as well.
    models = ExplorerModels.load([RUNS / "translation", snapshot])
    limits = Limits(max_tokens=10)
    with pytest.raises(InputError, match="has 18 tokens; the explorer shows at most 10"):
        next(iter(models)).run(text="a b c d", limits=limits)
    with pytest.raises(InputError, match="has 18 tokens; the explorer shows at most 10"):
        compare_models(models, limits=limits, text="a b c d")
    assert compare_models(models, limits=Limits(max_tokens=18), text="a b c d").data["pairs"]

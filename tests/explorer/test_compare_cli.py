"""``qkv explore --model DIR --compare DIR2 INPUT -o page.html``: a saved translation run against
a "snapshot" of it (a copy with slightly moved weights, in ``snapshots/5min/`` as training
writes them) gives the compare page, whose difference is the two models' own B - A; two models
of different tasks, or whose translations differ, exit 2 with one line and write nothing; each
model's views are held to the explorer's token limit, as one model's page is."""

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


def test_explore_compare_refuses_another_task_or_another_translation(tmp_path, capsys):
    out = tmp_path / "a.html"
    translation, classification = RUNS / "translation", RUNS / "classification"
    far = perturbed_copy(translation, tmp_path, scale=0.1)  # translates "a b c d" differently
    cases = [
        (classification, "a text classifier; compare two models of one task"),
        (far, "view 'cross': the queries differ (translation has 18 tokens, "),
    ]
    for other, message in cases:
        argv = ["explore", "--model", str(translation), "--compare", str(other), "a b c d"]
        assert main([*argv, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()


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

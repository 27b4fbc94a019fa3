"""``ViewOptions(target=...)``: a model that writes text shows its attention while reading a
given output (teacher forcing) instead of its own, so that two models can be compared on one
output. The decoder is causal, so reading ``T + more`` gives the same first rows as reading
``T``; reading its own output gives its own views; a runner that writes no text refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import qkv
from qkv.tasks.spec import GIVEN, ViewOptions

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def translator():
    return qkv.load(RUNS / "translation")


def test_a_translator_reads_the_target_it_is_given(translator):
    own = translator.views("a b c d")
    short = translator.views("a b c d", ViewOptions(target="d c b a"))
    longer = translator.views("a b c d", ViewOptions(target="d c b a c"))
    pieces = translator.target_tokenizer.pieces(translator.target_tokenizer.encode("d c b a"))
    assert short.view("cross").queries == [*pieces, "</s>"]
    assert short.output["text"] == "d c b a" != own.output["text"]
    assert short.summary.endswith(GIVEN) and not own.summary.endswith(GIVEN)
    rows = len(pieces) + 1  # row t reads <s> and the pieces before t: shared by both targets
    for kind in ("cross", "encoder", "decoder"):
        for a, b in zip(short.view(kind).layers, longer.view(kind).layers, strict=True):
            n = rows if kind != "encoder" else a.size(1)
            cols = n if kind == "decoder" else a.size(2)
            torch.testing.assert_close(a[:, :n, :cols], b[:, :n, :cols], atol=1e-6, rtol=0)
    assert not torch.allclose(
        own.view("cross").layers[-1][:, :2], short.view("cross").layers[-1][:, :2]
    )


def test_a_language_model_reading_its_own_continuation_shows_its_own_views():
    model = qkv.load(RUNS / "language_model")
    own = model.views("abc", ViewOptions(new_tokens=4))
    read = model.views("abc", ViewOptions(target=own.output["text"]))
    assert read.output["text"] == own.output["text"] and read.summary.endswith(GIVEN)
    for a, b in zip(own.views[0].layers, read.views[0].layers, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_a_summariser_reads_a_given_summary_and_marks_what_it_would_copy():
    model = qkv.load(RUNS / "summarisation")
    text = "the king of bavotek went to rulamip"
    seen = model.views(text, ViewOptions(target="the king bavotek"))
    assert seen.output["tokens"] == ["the", "king", "bavotek"]
    assert seen.output["copied"] == [False, False, True]  # bavotek: only the source has it
    assert [q.split(" ")[0] for q in seen.view("copy").queries] == [
        "the",
        "king",
        "bavotek",
        "</s>",
    ]


WRITE_NOTHING = [
    ("classification", "a film"),
    ("tagging", "to walk"),
    ("reading", "the key XXXXX .\nthe key opens Kalo ."),
]


@pytest.mark.parametrize("run, item", WRITE_NOTHING)
def test_a_model_that_writes_no_text_refuses_a_target(run, item):
    with pytest.raises(ValueError, match="is for models that write text"):
        qkv.load(RUNS / run).views(item, ViewOptions(target="x"))


@pytest.mark.parametrize("bad", ["", "   ", 3, ["a"]])
def test_a_target_must_be_text(bad):
    with pytest.raises(ValueError, match="target must be a non-empty str"):
        ViewOptions(target=bad)


def test_a_target_longer_than_the_model_writes_or_with_a_beam_is_refused(translator):
    with pytest.raises(
        ValueError, match=r"target has \d+ tokens; this translator writes at most 14 for a"
    ):
        translator.views("a b", ViewOptions(target="a " * 100))
    with pytest.raises(ValueError, match="pass beam or target, not both"):
        translator.views("a b", ViewOptions(target="a", beam=2))
    with pytest.raises(ValueError, match="pass new_tokens or target, not both"):
        qkv.load(RUNS / "language_model").views("ab", ViewOptions(target="c", new_tokens=2))

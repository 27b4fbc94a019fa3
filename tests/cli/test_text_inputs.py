"""Issue 34 through ``qkv summarize``, ``reply`` and ``translate`` (in this process, on the
trained runs of ``tests/fixtures/runs``, read only): a beam translate refuses is refused by
every command that decodes, standard input is read once, a turn may not hold the turn
separator, and an empty text warns as an over-long one does (one ``warning:`` line) instead of
being written from nothing in silence."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from qkv.cli.main import main

pytestmark = pytest.mark.usefixtures("one_thread")

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
SUMMARISER = ["summarize", "--model", str(RUNS / "summarisation")]
REPLIER = ["reply", "--model", str(RUNS / "dialogue")]
TRANSLATOR = ["translate", "--model", str(RUNS / "translation")]


def _run(capsys, monkeypatch, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        [*SUMMARISER, "a text", "--beam", "100000"],
        [*SUMMARISER, "a text", "--beam", "100000", "--json"],
        [*REPLIER, "hello", "--beam", "100000"],
        [*TRANSLATOR, "a text", "--beam", "100000"],
    ],
)
def test_every_command_that_decodes_refuses_the_beam_translate_refuses(capsys, monkeypatch, argv):
    code, out, err = _run(capsys, monkeypatch, argv)
    assert (code, out) == (2, "")
    assert (
        err
        == f"qkv {argv[0]}: error: beam_size must be between 1 and 1000, got 100000 (1: greedy)\n"
    )


def test_standard_input_given_twice_is_refused(capsys, monkeypatch):
    code, out, err = _run(capsys, monkeypatch, [*SUMMARISER, "--file", "-", "--file", "-"], "x\n")
    assert (code, out) == (2, "")
    assert err == (
        "qkv summarize: error: --file - is given 2 times, but standard input can be read only "
        "once; give --file - once\n"
    )


def test_a_turn_holding_the_separator_is_refused_not_split(capsys, monkeypatch):
    code, out, err = _run(capsys, monkeypatch, [*REPLIER, "good day", "who <turn> goes there"])
    assert (code, out) == (2, "")
    assert err.startswith("qkv reply: error: turn 2 ('who <turn> goes there') holds '<turn>'")
    assert err.count("\n") == 1
    assert _run(capsys, monkeypatch, [*REPLIER, "good day", "who < turn > goes there"])[0] == 0


@pytest.mark.parametrize(
    ("argv", "stdin", "shown"),
    [
        ([*SUMMARISER, "   ", "return the sum", ""], "", "2 text(s) empty or only whitespace "
         "(text #0 ('   '), text #2 (''))"),
        ([*SUMMARISER, "--json", " \t "], "", "the text is empty or only whitespace"),
        ([*REPLIER, "  "], "", "1 text(s) empty or only whitespace (text #0 ('  '))"),
        (TRANSLATOR, "abc\n\n", "1 text(s) empty or only whitespace (text #1 (''))"),
    ],
)  # fmt: skip
def test_an_empty_text_warns_that_the_output_is_made_from_nothing(
    capsys, monkeypatch, argv, stdin, shown
):
    code, out, err = _run(capsys, monkeypatch, argv, stdin)
    assert code == 0 and out  # still written, one output per input, as for over-long inputs
    warning = f"qkv {argv[0]}: warning: {shown}: the model reads nothing but the end of its input"
    assert warning in err, err
    assert err.count("empty or only whitespace") == 1


def test_a_text_with_words_gives_no_empty_warning(capsys, monkeypatch):
    code, _, err = _run(capsys, monkeypatch, [*SUMMARISER, "return the sum of two numbers"])
    assert code == 0 and "empty" not in err

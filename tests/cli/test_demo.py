"""``qkv demo`` through the real command line: every learnable score must actually learn."""

import re

from tests.commands import qkv, qkv_process


def test_demo_alignments_are_learned():
    result = qkv_process("demo", "--no-speed")
    assert result.returncode == 0, result.stderr
    accuracy = {
        name: float(value)
        for name, value in re.findall(r"^(\w+) \(.*accuracy ([\d.]+)%", result.stdout, re.M)
    }
    assert set(accuracy) == {"Dot", "ScaledDot", "General", "Additive", "Location"}
    for name in ("Dot", "ScaledDot", "General", "Additive"):
        assert accuracy[name] >= 95.0, (name, accuracy)
    assert accuracy["Location"] <= 30.0  # content-blind: about chance (1/6)


def test_unknown_command_exits_2_without_traceback():
    result = qkv_process("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "invalid choice" in result.stderr


def test_no_command_prints_help_and_exits_2():
    result = qkv()
    assert result.returncode == 2
    assert "demo" in result.stderr


def test_study_scores_is_the_demo(monkeypatch, capsys):
    """``qkv study scores`` prints what ``qkv demo`` prints, from the same study."""
    from qkv.cli.demo import format_report
    from qkv.cli.main import main
    from qkv.studies import score_functions

    calls = []
    report = score_functions.DemoReport(alignments=[], speed=None)
    monkeypatch.setattr(score_functions, "run_demo", lambda **kw: calls.append(kw) or report)
    assert main(["study", "scores"]) == 0
    assert capsys.readouterr().out == format_report(report) + "\n"
    assert calls == [{}]

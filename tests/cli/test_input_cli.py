"""Issue 15 through the command line: invalid UTF-8 is the same clean error (exit 2, naming the
file or ``<stdin>`` and the byte offset, no traceback) whether it comes from ``--file PATH``,
``--file -`` or piped standard input; inputs longer than a model was trained on print one
``qkv CMD: warning:`` line on stderr, and inputs past its hard limit exit 2 naming both
lengths."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from qkv.cli.main import main
from qkv.viz.image_attention import save_image
from tests.tasks.tiny_models import ROOT, tiny_models

pytestmark = pytest.mark.usefixtures("one_thread")

BAD = b"a b c\n\xff\xfe x\n"  # line 2 starts at byte 6 with a byte UTF-8 never uses


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return tiny_models(
        tmp_path_factory, ("translation", "language_model", "classification", "tagging", "caption")
    )


def _run(capsys, monkeypatch, argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


COMMANDS = {
    "translate": lambda d: ["translate", "--model", str(d["translation"])],
    "classify": lambda d: ["classify", "--model", str(d["classification"]), "--file", "-"],
    "tag": lambda d: ["tag", "--model", str(d["tagging"]), "--file", "-"],
    "embed": lambda d: ["embed", "--file", "-"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_invalid_utf8_on_stdin_and_in_a_file_are_the_same_clean_error(
    dirs, capsys, monkeypatch, tmp_path, command
):
    argv = COMMANDS[command](dirs)
    code, out, err = _run(capsys, monkeypatch, argv, BAD)
    assert code == 2 and out == ""
    assert f"qkv {command}: error: <stdin>: invalid UTF-8 at byte 6 (line 2" in err
    if command == "translate":
        return  # reads stdin only
    bad = tmp_path / "bad.txt"
    bad.write_bytes(BAD)
    code, _, err = _run(capsys, monkeypatch, [*argv[:-1], str(bad)])
    assert code == 2 and f"error: {bad}: invalid UTF-8 at byte 6 (line 2" in err


def test_invalid_utf8_piped_into_the_real_command_is_no_traceback(dirs):
    result = subprocess.run(
        [sys.executable, "-m", "qkv", "translate", "--model", str(dirs["translation"])],
        input=BAD,
        capture_output=True,
        cwd=ROOT,
        env={"PYTHONIOENCODING": "utf-8:surrogateescape", "PATH": "", "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"<stdin>: invalid UTF-8 at byte 6" in result.stderr


def test_stdin_lines_keep_their_text_and_lose_their_line_ends(dirs, capsys, monkeypatch):
    code, out, err = _run(
        capsys,
        monkeypatch,
        ["classify", "--model", str(dirs["classification"]), "--file", "-", "--json"],
        b"superb film\r\n\n  \ndull plot",
    )
    assert code == 0, err
    assert [line.split('"label"')[0] for line in out.splitlines()] == [
        '{"text": "superb film", ',
        '{"text": "dull plot", ',
    ]


def test_long_input_warns_on_stderr_and_absurd_input_exits_2(dirs, capsys, monkeypatch):
    translate = ["translate", "--model", str(dirs["translation"])]
    code, out, err = _run(capsys, monkeypatch, translate, (" ".join("a" * 20) + "\n").encode())
    assert code == 0 and len(out.splitlines()) == 1
    assert err.startswith("qkv translate: warning: 1 text(s) (text #0")
    assert "20 tokens) longer than the 16 tokens this model was trained on" in err
    code, out, err = _run(capsys, monkeypatch, translate, ("x " * 100_000).encode())
    assert code == 2 and out == ""
    assert "error: text #0" in err and "takes at most 128 tokens and was trained on up to 16" in err

    classify = ["classify", "--model", str(dirs["classification"]), "the film was " * 10]
    code, out, err = _run(capsys, monkeypatch, classify)
    assert code == 0 and "qkv classify: warning: 1 text(s)" in err and "cut to their" in err
    tag = ["tag", "--model", str(dirs["tagging"]), "to walk 7 . " * 10]
    code, out, err = _run(capsys, monkeypatch, tag)
    assert code == 0 and "qkv tag: warning:" in err and "windows of whole words" in err


def test_generation_warnings_come_before_any_output(dirs, capsys, monkeypatch):
    model = str(dirs["language_model"])
    code, out, err = _run(capsys, monkeypatch, ["generate", "--model", model, "abc",
                                                "--max-new-tokens", "40"])  # fmt: skip
    assert code == 0 and out.startswith("abc") and len(out) == 44
    assert err.startswith("qkv generate: warning: the longest prompt (3 tokens) plus")
    code, out, err = _run(capsys, monkeypatch, ["generate", "--model", model, "a" * 64])
    assert code == 2 and out == ""  # the prompt is not echoed before the error
    assert "the prompt has 64 tokens; this model takes at most 63 tokens" in err


def test_plot_attention_refuses_text_too_long_to_plot_before_translating(
    dirs, capsys, monkeypatch, tmp_path
):
    from qkv.tasks.translation.runner import Translator

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(Translator, "load", never)
    image = tmp_path / "plot.png"
    argv = ["plot-attention", "--model", str(dirs["translation"]), "-o", str(image)]
    code, _, err = _run(capsys, monkeypatch, [*argv, "a " * 2000])
    assert code == 2 and not image.exists()
    assert "TEXT has more than 150 words; a plot shows at most 150 tokens per axis" in err
    code, _, err = _run(capsys, monkeypatch, [*argv, "--heads", "a " * 65])
    assert code == 2 and "at most 64 tokens per axis with --heads" in err


def test_caption_warns_about_long_strips_and_refuses_absurd_ones(
    dirs, capsys, monkeypatch, tmp_path
):
    import torch

    long, absurd = tmp_path / "long.png", tmp_path / "absurd.png"
    save_image(torch.zeros(1, 8, 24, dtype=torch.uint8), long)
    save_image(torch.zeros(1, 8, 8 * 17, dtype=torch.uint8), absurd)
    argv = ["caption", "--model", str(dirs["caption"])]
    code, out, err = _run(capsys, monkeypatch, [*argv, str(long)])
    assert code == 0 and out.endswith(f"\t{long}\n")
    assert f"qkv caption: warning: 1 strip(s) (strip #0 ('{long}'" in err
    code, out, err = _run(capsys, monkeypatch, [*argv, str(long), str(absurd)])
    assert code == 2 and out == ""
    assert "has 17 tiles; this model takes at most 16 tiles and was trained on up to 2" in err

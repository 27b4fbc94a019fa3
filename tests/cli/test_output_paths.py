"""Every command that writes a file: a path that exists and is not a regular file is refused with
exit 2 before any work and left as it was; ``-o -`` writes the file through to standard output,
the command's own lines going to standard error. FIFOs and links live in a temporary folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from qkv.cli.main import main

pytestmark = pytest.mark.usefixtures("one_thread")

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
TRANSLATION = str(RUNS / "translation")

# command -> (its arguments before "-o OUT", a name for OUT that the command would accept)
WRITERS = {
    "plot-attention": (["plot-attention", "--model", TRANSLATION, "the king"], "out.png"),
    "plot-curves": (["plot-curves", TRANSLATION], "out.png"),
    "explore": (["explore", "--model", TRANSLATION, "the king"], "out.html"),
    "embed": (["embed", "a sentence"], "out.jsonl"),
    "answer": (["answer", "--model", str(RUNS / "reading"), "--squad", "unused.json"], "out.json"),
    "export": (["export", "--format", "ctranslate2", "--model", TRANSLATION], "out"),
}


def _special(tmp_path: Path, kind: str, name: str) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / name)
        return tmp_path / name
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / name).symlink_to(tmp_path / "pipe")
    return tmp_path / name


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo"])
@pytest.mark.parametrize("command", WRITERS)
def test_a_special_file_at_the_output_is_refused_and_kept(command, kind, tmp_path, capsys):
    argv, name = WRITERS[command]
    out = _special(tmp_path, kind, name)
    code = main([*argv, "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert f"qkv {command}: error: " in captured.err and str(out) in captured.err
    assert "Traceback" not in captured.err
    assert stat.S_ISFIFO(os.stat(out).st_mode)  # still a FIFO (through its link)
    assert out.is_symlink() == (kind == "link-to-fifo")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name, "pipe"] if kind == "link-to-fifo" else [name]
    )  # nothing written beside it


def test_plot_curves_to_standard_output_writes_the_png_alone(capfdbinary):
    assert main(["plot-curves", TRANSLATION, "-o", "-"]) == 0
    out, err = capfdbinary.readouterr()
    assert out.startswith(b"\x89PNG\r\n\x1a\n") and out.endswith(b"IEND\xaeB`\x82")
    assert b"wrote -" in err


def test_plot_curves_through_a_link_writes_its_target(tmp_path, capsys):
    target = tmp_path / "curves.png"
    target.write_bytes(b"old")
    (tmp_path / "link.png").symlink_to(target)
    assert main(["plot-curves", TRANSLATION, "-o", str(tmp_path / "link.png")]) == 0
    assert (tmp_path / "link.png").is_symlink()
    assert target.read_bytes().startswith(b"\x89PNG")

"""``qkv plot-attention --format``: ``-o -`` writes the SVG alone to standard output (its lines
go to standard error), and a --format that contradicts -o's suffix, or a suffix no format has,
is refused with exit 2 before the model loads, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qkv.cli.main import main
from tests.viz.test_figure_file import svg_texts

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "translation"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("plot") / "translation"
    shutil.copytree(RUN, copy)
    return copy


def test_format_svg_to_standard_output(translator, capfdbinary):
    code = main(["plot-attention", "--model", str(translator), "a b c d", "-o", "-",
                 "--format", "svg"])  # fmt: skip
    out, err = capfdbinary.readouterr()
    assert code == 0, err
    assert out.startswith(b"<?xml") and out.rstrip().endswith(b"</svg>")
    texts = svg_texts(out)  # standard output holds the SVG alone: it parses whole
    assert {"▁a", "▁d", "</s>", "source", "target"} <= set(texts)
    assert err.decode().splitlines()[-1] == "wrote -"


def test_format_names_a_file_without_a_suffix(translator, tmp_path, capsys):
    out = tmp_path / "figure"
    code = main(["plot-attention", "--model", str(translator), "a b", "-o", str(out),
                 "--format", "pdf"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize(
    ("name", "extra", "message"),
    [
        ("a.png", ["--format", "svg"], "a.png as svg: its suffix says png; name a .svg file"),
        ("a.jpg", [], "a.jpg: the file must end in .png, .svg or .pdf"),
    ],
)
def test_a_format_the_suffix_contradicts_is_refused(translator, tmp_path, capsys, name, extra,
                                                    message):  # fmt: skip
    code = main(["plot-attention", "--model", str(translator), "a b", "-o",
                 str(tmp_path / name), *extra])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("qkv plot-attention: error: ") and message in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback
    assert not list(tmp_path.iterdir())

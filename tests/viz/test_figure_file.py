"""Figures are written as the file's suffix says (or the format asked for, for standard output,
which has no suffix); a contradiction or an unknown format is refused naming both; SVG keeps its
text as text, without changing matplotlib's settings for anyone else."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import matplotlib
import pytest

from qkv.cli.plot_attention import FORMATS as CLI_FORMATS
from qkv.viz.figure_file import FORMATS, figure_format, save_figure

SVG = "{http://www.w3.org/2000/svg}"


def _figure():
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2, 2))
    axes = figure.add_subplot()
    axes.set_title("a title")
    axes.set_xticks([0, 1], labels=["kalo", "</s>"])
    return figure


def svg_texts(data: bytes | str) -> list[str]:
    """Every ``<text>`` element's text in an SVG document, read back with an XML parser."""
    root = ET.fromstring(data)
    return ["".join(node.itertext()) for node in root.iter(f"{SVG}text")]


@pytest.mark.parametrize(
    ("path", "format", "expected"),
    [
        ("a.png", None, "png"),
        ("a.SVG", None, "svg"),
        ("a.pdf", "pdf", "pdf"),
        ("-", None, "png"),
        ("-", "svg", "svg"),
        ("/dev/stdout", "pdf", "pdf"),
        ("figure", "svg", "svg"),
    ],
)
def test_the_format_is_the_suffix_or_the_one_asked_for(path, format, expected):
    assert figure_format(path, format) == expected


@pytest.mark.parametrize(
    ("path", "format", "message"),
    [
        ("a.png", "svg", r"a.png as svg: its suffix says png; name a .svg file"),
        ("a.jpg", None, r"a.jpg: the file must end in .png, .svg or .pdf"),
        ("a.jpg", "png", r"a.jpg: the file must end in"),
        ("-", "eps", r"'eps' figure: the format must be png, svg or pdf"),
    ],
)
def test_a_contradiction_or_an_unknown_format_is_refused(path, format, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        figure_format(path, format)
    with pytest.raises(ValueError, match=message):
        save_figure(_figure(), tmp_path / path if path != "-" else path, format=format)
    assert not list(tmp_path.iterdir())  # nothing written


def test_svg_keeps_its_text_as_text_and_leaves_the_settings_alone(tmp_path):
    before = dict(matplotlib.rcParams)
    path = save_figure(_figure(), tmp_path / "a.svg")
    assert {"a title", "kalo", "</s>"} <= set(svg_texts(path.read_bytes()))
    assert dict(matplotlib.rcParams) == before  # the text setting was for this file only


def test_a_pdf_embeds_truetype_fonts(tmp_path):
    data = save_figure(_figure(), tmp_path / "a", format="pdf").read_bytes()
    fonts = set(re.findall(rb"/Subtype /(\w+)", data))  # matplotlib's default would be Type3
    assert data.startswith(b"%PDF") and fonts & {b"TrueType", b"CIDFontType2"}, fonts
    assert b"Type3" not in fonts


def test_standard_output_gets_the_whole_file(capfdbinary):
    save_figure(_figure(), "-", format="svg")
    out, _ = capfdbinary.readouterr()
    assert "kalo" in svg_texts(out)


def test_the_cli_offers_the_formats_the_library_writes():
    assert CLI_FORMATS == FORMATS

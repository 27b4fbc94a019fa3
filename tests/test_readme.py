"""Every page's examples run as written: the README's and those of every page of the site
(docs/**/*.md). Each page's ```python blocks run in order in one namespace, from the repository
root (they load the tiny runs in tests/fixtures/runs); a block whose fence line has a title
(``title="needs runs/demo"``, ``title="interface sketch, not run"``) is shown but not run, and the
title, visible on the page, says why. Every ``qkv ...`` line of
a ```bash block parses with the real parser, and a ```yaml block that names a configuration file
on its first line (``# configs/....yaml``) is an excerpt of that file, key for key."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
IDS = [str(page.relative_to(ROOT)) for page in PAGES]


def _blocks(page: Path, language: str) -> list[tuple[str, str]]:
    """The (fence line's rest, body) of each ```language block of ``page``."""
    return re.findall(rf"^```{language}([^\n]*)\n(.*?)^```", page.read_text(), re.S | re.M)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_python_blocks_run(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for info, block in _blocks(page, "python"):
        if "title=" in info:
            assert re.search(r'title="[^"]{8,}"', info), f"{page.name}: {info!r} says not why"
            continue
        exec(compile(block, str(page), "exec"), namespace)


def _commands(page: Path) -> list[list[str]]:
    """The arguments of each ``qkv ...`` (or ``python -m qkv ...``) line in ``page``'s shell
    blocks; optional parts written [like this] are documentation, not syntax."""
    text = page.read_text().replace("\\\n", " ")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if "[" in line or not line:
                continue
            words = shlex.split(line)
            if words[:1] == ["qkv"]:
                commands.append(words[1:])
            elif "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["qkv"]:
                commands.append(words[words.index("-m") + 2 :])
    return commands


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_command_lines_parse(page):
    """Every ``qkv ...`` line is accepted by the real parser (argparse exits on a bad flag)."""
    from qkv.cli.main import build_parser

    parser = build_parser()
    for args in _commands(page):
        parsed = parser.parse_args(args)
        assert hasattr(parsed, "run"), args


def test_the_pages_hold_examples():
    """The parser check above is not vacuous: the README and the task pages have commands."""
    assert len(_commands(ROOT / "README.md")) >= 3
    assert len([a for p in (ROOT / "docs/tasks").glob("*.md") for a in _commands(p)]) >= 40


def _is_excerpt(part: object, whole: object) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            key in whole and _is_excerpt(value, whole[key]) for key, value in part.items()
        )
    return part == whole


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_configuration_excerpts_match_their_files(page):
    for _, block in _blocks(page, "yaml"):
        first = block.splitlines()[0]
        if not first.startswith("# configs/"):
            continue
        path = ROOT / first[2:].strip()
        whole = yaml.safe_load(path.read_text())
        assert _is_excerpt(yaml.safe_load(block), whole), f"{page.name}: not an excerpt of {path}"

"""The documentation site builds as ``make docs`` builds it (``mkdocs build --strict``) with no
warning; its pages load nothing from the network (scripts, styles, images, frames: a link a
reader clicks is fine); the generated configuration reference lists every key of the configs and
the CLI reference every command; the API pages show a docstring's Sphinx roles as links (or
code), never as text; and a tutorial notebook's inline attention view (an
``<iframe srcdoc=...>`` output) reaches the built page."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.viz.notebook_html import fetched_urls, frames

pytest.importorskip("mkdocs", reason="the site needs the docs extra (pip install -e '.[docs]')")
pytest.importorskip("mkdocs_jupyter", reason="the site needs the docs extra")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true",
       "PYTHONPATH": str(ROOT / "src")}  # fmt: skip


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-f",
        str(config),
        "-d",
        str(site),
    ]
    return subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    built = _mkdocs(ROOT / "mkdocs.yml", site)
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    warnings = [line for line in output.splitlines() if "WARNING" in line]
    assert warnings == [], "\n".join(warnings)
    return site


def test_every_page_loads_nothing_from_the_network(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    fetched = {
        str(p.relative_to(site)): fetched_urls(p.read_text(encoding="utf-8"), links=False)
        for p in pages
    }
    assert {page: urls for page, urls in fetched.items() if urls} == {}


def _text(site: Path, page: str) -> str:
    return (site / f"{page}.html").read_text(encoding="utf-8")  # offline: no directory URLs


def test_the_configuration_reference_lists_every_key(site):
    from qkv.decoding.sampling import SamplingConfig
    from qkv.models.registry import model_fields
    from qkv.tasks.translation.config import DataConfig
    from qkv.training.config import TrainConfig

    page = _text(site, "reference/configuration")
    for cls in (TrainConfig, DataConfig, SamplingConfig):
        missing = [f.name for f in dataclasses.fields(cls) if f"<code>{f.name}</code>" not in page]
        assert missing == [], f"{cls.__name__}: {missing}"
    for family in ("transformer", "encoder_classifier", "vit"):
        missing = [key for key in model_fields(family) if f"<code>{key}</code>" not in page]
        assert missing == [], f"{family}: {missing}"
    assert "one of inverse_sqrt" in page  # TrainConfig.schedule's choices, from SCHEDULES


# A Sphinx role as a page shows it when nothing rewrote it: ``:class:`X``` reads ``:class:<code>X``.
SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|const|exc|obj|mod):")


def test_the_api_pages_show_links_not_sphinx_roles(site):
    """Every docstring role became a link or code (tools/griffe_roles.py): none shows as text,
    and a role across pages links to where the name is defined."""
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (site / "reference" / "api").iterdir()
             if p.suffix == ".html"}  # fmt: skip
    assert len(pages) >= 10
    assert {name: SPHINX_ROLE.findall(page) for name, page in pages.items()
            if SPHINX_ROLE.search(page)} == {}  # fmt: skip
    # qkv.models.show_attend_tell.region_attention: :func:`qkv.attention.core.attend`.
    assert 'href="attention.html#qkv.attention.core.attend"' in pages["models"]
    # Seen.figure's :meth:`view` (its own class); ViewOptions' :meth:`Seen.compare` (imported).
    assert 'href="#qkv.tasks.seen.Seen.view"' in pages["tasks-spec"]
    assert 'href="#qkv.tasks.seen.Seen.compare"' in pages["tasks-spec"]


def test_the_cli_reference_lists_every_command(site):
    from qkv.cli.main import build_parser

    page = _text(site, "reference/cli")
    (commands,) = [a for a in build_parser()._actions if hasattr(a, "choices") and a.choices]
    missing = [name for name in commands.choices if f'id="qkv-{name}"' not in page]
    assert missing == []


def test_a_notebook_view_reaches_the_page(tmp_path):
    """A notebook whose output is qkv's inline view renders with mkdocs-jupyter as the site
    configures it (the committed outputs shown, nothing run): the frame is on the page."""
    import nbformat
    import torch

    import qkv

    seen = qkv.show_attention(torch.softmax(torch.randn(2, 3, 3), -1), ["a", "b", "c"])
    cell = nbformat.v4.new_code_cell("view", execution_count=1)
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": seen._repr_html_(), "text/plain": "view"})]  # fmt: skip
    docs = tmp_path / "docs" / "tutorials"
    docs.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), docs / "view.ipynb")
    (docs.parent / "index.md").write_text("# home\n", encoding="utf-8")
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (jupyter,) = [p for p in ours["plugins"] if isinstance(p, dict) and "mkdocs-jupyter" in p]
    config = {"site_name": "t", "docs_dir": "docs", "theme": {"name": "material", "font": False},
              "plugins": [jupyter], "use_directory_urls": False,
              "hooks": [str(ROOT / "tools" / "site_hooks.py")],
              "nav": ["index.md", "tutorials/view.ipynb"]}  # fmt: skip
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    built = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    page = (tmp_path / "site" / "tutorials" / "view.html").read_text(encoding="utf-8")
    (frame,) = frames(page)
    assert "srcdoc" in frame and "qkv-data" in frame["srcdoc"]
    assert fetched_urls(page, links=False) == []

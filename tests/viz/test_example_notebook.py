"""The example notebook (``docs/notebooks/attention_views.py``, jupytext "percent" text) runs
headless in a Jupyter kernel (nbclient, ipykernel), as a reader runs it from the repository
root: every cell runs without error, each attention display is HTML that a browser would load
nothing from the network for, and between them they show every kind of view qkv draws."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import pytest

from tests.viz.notebook_html import fetched_urls, frames, page_data

nbformat = pytest.importorskip("nbformat", reason="needs nbformat (pip install -e '.[dev]')")
nbclient = pytest.importorskip("nbclient", reason="needs nbclient (pip install -e '.[dev]')")
pytest.importorskip("ipykernel", reason="needs ipykernel (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebooks" / "attention_views.py"
CELL = re.compile(r"^# %%(?P<markdown> \[markdown\])?.*$", re.M)
# The view ids of every kind the notebook shows: cross-, encoder and causal decoder attention,
# a reader's question-to-passage attention, a pointer-generator's copy attention, a ViT's
# patches, a captioner's maps over the strip, and qkv.show_attention's raw weights.
KINDS = {"cross", "encoder", "decoder", "question", "copy", "vit", "caption", "attention"}
DISPLAYS = 11  # ten tasks' runs and one show_attention


def percent_to_notebook(text: str):
    """A notebook from jupytext's "percent" format: a cell per ``# %%`` line (markdown where it
    says ``[markdown]``, its lines' leading ``# `` dropped); text before the first is ignored."""
    marks = list(CELL.finditer(text))
    cells = []
    for mark, end in zip(marks, [*marks[1:], None], strict=True):
        body = text[mark.end() : end.start() if end else len(text)].strip("\n")
        if mark["markdown"]:
            lines = [re.sub(r"^# ?", "", line) for line in body.splitlines()]
            cells.append(nbformat.v4.new_markdown_cell("\n".join(lines)))
        else:
            cells.append(nbformat.v4.new_code_cell(body))
    return nbformat.v4.new_notebook(cells=cells)


def test_percent_to_notebook_splits_cells_and_unwraps_markdown():
    notebook = percent_to_notebook("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n")
    assert [(c.cell_type, c.source) for c in notebook.cells] == [
        ("markdown", "# Title\n\ntext"),
        ("code", "x = 1"),
    ]


def _kernel_manager(tmp: Path):
    """A kernel that runs this interpreter (the environment under test), whatever kernelspecs
    the machine's Jupyter paths hold."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = tmp / "kernels" / "qkv-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "qkv test", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(tmp / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="qkv-test", kernel_spec_manager=specs)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook, executed from the repository root (as its first cell says a reader runs
    it), one torch thread, and a last cell that reports the kernel's interpreter."""
    notebook = percent_to_notebook(NOTEBOOK.read_text(encoding="utf-8"))
    notebook.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("QKV_NOTEBOOK_RUNS", raising=False)  # the reader's default path
        patch.setenv("OMP_NUM_THREADS", "1")
        patch.setenv("MKL_NUM_THREADS", "1")
        client = nbclient.NotebookClient(
            notebook,
            km=_kernel_manager(tmp_path_factory.mktemp("kernel")),
            timeout=300,
            resources={"metadata": {"path": str(ROOT)}},
        )
        client.execute()
    return notebook


def _displays(notebook) -> list[dict]:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type in ("display_data", "execute_result")
    ]


def test_the_notebook_runs_in_this_environment_without_errors(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]  # fmt: skip
    assert errors == []
    last = executed.cells[-1].outputs
    assert [o.text.strip() for o in last if o.output_type == "stream"] == [sys.executable]


def test_every_display_is_html_that_loads_nothing_from_the_network(executed):
    displays = _displays(executed)
    for output in displays:
        html = output.data["text/html"]
        assert fetched_urls(html) == [], fetched_urls(html)
        (frame,) = frames(html)
        assert page_data(frame["srcdoc"])["result"]["views"], "a display with no views"
    assert len(displays) == DISPLAYS


def test_the_displays_show_every_kind_of_view(executed):
    ids = set()
    for output in _displays(executed):
        (frame,) = frames(output.data["text/html"])
        ids |= {view["id"] for view in page_data(frame["srcdoc"])["result"]["views"]}
    assert ids == KINDS
    types = {
        view["type"]
        for output in _displays(executed)
        for view in page_data(frames(output.data["text/html"])[0]["srcdoc"])["result"]["views"]
    }
    assert types == {"tokens", "image"}


def test_every_display_has_a_markdown_cell_before_it_saying_what_it_shows():
    cells = percent_to_notebook(NOTEBOOK.read_text(encoding="utf-8")).cells
    for before, cell in itertools.pairwise(cells):
        if cell.cell_type == "code" and "display(" in cell.source:
            assert before.cell_type == "markdown" and before.source.startswith("## "), cell.source


@pytest.mark.parametrize("where", ["root", "notebook folder", "elsewhere, told"])
def test_the_notebook_finds_the_fixture_runs_from_where_readers_run_it(
    where, tmp_path, monkeypatch
):
    """Its first code cell, run from the repository root (VS Code, a script), from the notebook's
    folder (Jupyter's working directory) or elsewhere with ``QKV_NOTEBOOK_RUNS``."""
    cwd = {"root": ROOT, "notebook folder": NOTEBOOK.parent, "elsewhere, told": tmp_path}[where]
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("QKV_NOTEBOOK_RUNS", raising=False)
    if where == "elsewhere, told":
        monkeypatch.setenv("QKV_NOTEBOOK_RUNS", str(ROOT / "tests" / "fixtures" / "runs"))
    (first, *_) = [c for c in percent_to_notebook(NOTEBOOK.read_text()).cells
                   if c.cell_type == "code"]  # fmt: skip
    names: dict = {}
    exec(compile(first.source, str(NOTEBOOK), "exec"), names)
    assert names["RUNS"].resolve() == ROOT / "tests" / "fixtures" / "runs"
    monkeypatch.delenv("QKV_NOTEBOOK_RUNS", raising=False)
    with pytest.raises(FileNotFoundError, match="QKV_NOTEBOOK_RUNS"):
        monkeypatch.chdir(tmp_path)
        exec(compile(first.source, str(NOTEBOOK), "exec"), {})

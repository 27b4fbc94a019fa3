"""A wheel works outside the repository: build one from this checkout, install it into a fresh
virtual environment, and from a directory with no ``configs/`` train a packaged configuration by
name, evaluate the model and display its attention as a notebook does (the attention page's
static files are in the wheel). The new environment borrows this one's dependencies (torch and
the rest) through a ``.pth`` line instead of installing them again; it checks that ``qkv``
itself comes from the wheel, not from ``src/``."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.viz.notebook_html import fetched_urls, frames, page_data

ROOT = Path(__file__).resolve().parents[2]
# A few steps on a few hundred pairs (as in tests/tasks/test_every_task.py): seconds, not minutes.
QUICK = ["train.max_steps=3", "train.eval_every=3", "train.warmup_steps=1",
         "train.checkpoint_every=null", "train.tensorboard=false", "data.options.n_train=300",
         "data.options.n_valid=10", "data.options.n_test=10",
         "data.valid_bleu_sentences=0"]  # fmt: skip

# In the installed package: a trained run's views as a notebook display (the attention page,
# drawn from the static files the wheel ships), and where those files were read from.
SHOW = """import json, sys
from importlib import resources
import qkv
seen = qkv.load(sys.argv[1]).views("a b c")
print(json.dumps({"static": str(resources.files("qkv.viz") / "static"), "html": seen.html()}))"""

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("build") is None, reason="needs `build` (pip install -e '.[dev]')"
)


def _run(*argv: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def _build_wheel(tmp: Path, env: dict[str, str]) -> Path:
    """Build from a copy of the checkout, so no ``build/`` or egg-info lands in the tree."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    # No isolation: the build needs only setuptools, which this environment has (works offline).
    built = _run(sys.executable, "-m", "build", "--wheel", "--no-isolation",
                 "--outdir", tmp / "dist", source, cwd=tmp, env=env)  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("qkv-*.whl")
    return wheel


def _venv(tmp: Path, env: dict[str, str]) -> Path:
    """A fresh environment whose own site-packages comes first, then this one's (without qkv:
    the editable install's path lives in a .pth file, which a plain path line does not run)."""
    venv = tmp / "venv"
    made = _run(sys.executable, "-m", "venv", venv, cwd=tmp, env=env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                cwd=tmp, env=env).stdout.strip()  # fmt: skip
    # Every site directory of this interpreter: this environment's and, when it was made with
    # --system-site-packages, the base interpreter's (where numpy may live).
    ours = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (Path(purelib) / "qkv-test-dependencies.pth").write_text(
        "".join(f"{path}\n" for path in dict.fromkeys(ours)), encoding="utf-8"
    )
    return venv


def test_the_wheel_trains_and_evaluates_a_packaged_config_by_name(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    wheel = _build_wheel(tmp_path, env)
    venv = _venv(tmp_path, env)
    installed = _run(venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index",
                     wheel, cwd=tmp_path, env=env)  # fmt: skip
    assert installed.returncode == 0, installed.stderr

    elsewhere = tmp_path / "elsewhere"  # no configs/ here, and not under the checkout
    elsewhere.mkdir()
    qkv = venv / "bin" / "qkv"
    where = _run(venv / "bin" / "python", "-c", "import qkv; print(qkv.__file__)",
                 cwd=elsewhere, env=env)  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr

    listed = _run(qkv, "configs", "--paths", cwd=elsewhere, env=env)
    assert listed.returncode == 0, listed.stderr
    paths = dict(line.split(maxsplit=1) for line in listed.stdout.splitlines())
    assert len(paths) == len(list((ROOT / "src" / "qkv" / "configs").rglob("*.yaml")))
    assert Path(paths["tiny/reverse-transformer"]).is_relative_to(venv)

    run = tmp_path / "run"
    sets = [f"out_dir={run}", *QUICK]
    trained = _run(qkv, "train", "tiny/reverse-transformer", "--threads", "1", "--quiet",
                   *[x for s in sets for x in ("--set", s)], cwd=elsewhere, env=env)  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    lines = trained.stdout.splitlines()
    assert lines[0] == f"training reverse-transformer (transformer) in {run}: 3 steps", lines
    assert f"model saved in {run}" in lines, lines

    scored = _run(qkv, "evaluate", "--model", run, "--limit", "3", "--quiet", cwd=elsewhere,
                  env=env)  # fmt: skip
    assert scored.returncode == 0, scored.stdout + scored.stderr
    assert "BLEU" in scored.stdout and "exact match" in scored.stdout, scored.stdout

    # The attention page ships in the wheel, and a Seen from the installed package displays it.
    static = ROOT / "src" / "qkv" / "viz" / "static"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.startswith("qkv/viz/static/")}
    assert shipped == {f"qkv/viz/static/{p.name}" for p in static.iterdir() if p.is_file()}
    shown = _run(venv / "bin" / "python", "-c", SHOW, run, cwd=elsewhere, env=env)
    assert shown.returncode == 0, shown.stderr
    display = json.loads(shown.stdout)
    assert Path(display["static"]).is_relative_to(venv), display["static"]
    (frame,) = frames(display["html"])
    views = page_data(frame["srcdoc"])["result"]["views"]
    assert [view["id"] for view in views] == ["cross", "encoder", "decoder"]
    assert fetched_urls(display["html"]) == []

    old_path = _run(qkv, "train", "configs/demo.yaml", cwd=elsewhere, env=env)
    assert old_path.returncode == 2 and "Traceback" not in old_path.stderr
    assert old_path.stderr.strip() == (
        "qkv train: error: no configuration file configs/demo.yaml "
        "(the packaged configuration of that name is `demo`)"
    )
    assert sorted(p.name for p in elsewhere.iterdir()) == []

"""Two ways for a test to run ``qkv``: :func:`qkv` through ``qkv.cli.main`` in this process
(the exit code, standard output and standard error as a real process would give them, without
the 2-3 s a new Python and PyTorch cost), and :func:`qkv_process`, a real ``python -m qkv``
process. A test uses the real process where the process boundary is what it checks (no
traceback reaching the terminal, piped bytes, signals, exit codes set by the interpreter); the
learning ladder in ``tests/integration/test_reverse_cli.py`` runs each main command that way."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def qkv(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``qkv ARGS`` in this process, from the repository's root; what it printed, captured."""
    from qkv.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    before = Path.cwd(), sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8")
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's own errors and --help
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        os.chdir(before[0])
        sys.stdin = before[1]
        torch.set_num_threads(threads)  # --threads sets the process's count
    return subprocess.CompletedProcess(["qkv", *args], code, out.getvalue(), err.getvalue())


def qkv_process(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``python -m qkv ARGS`` as a process of its own, from the repository's root."""
    env = dict(os.environ)
    if env.get("PYTEST_XDIST_WORKER"):  # one thread per parallel test worker (see conftest.py)
        env["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "qkv", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=ROOT,
        env=env,
        timeout=900,
    )

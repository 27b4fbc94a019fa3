"""Run the tutorials (``docs/tutorials/*.py``, jupytext "percent" text) as notebooks.

    python tools/notebooks.py docs/tutorials/*.py            # full budgets: writes each .ipynb
    python tools/notebooks.py --mode smoke docs/tutorials/*.py   # tiny budgets, writes nothing

A tutorial reads its budget from one switch, the environment variable ``QKV_TUTORIAL_MODE``
(``full`` or ``smoke``), so the smoke run that ``make test`` does goes through the same code as
the full run that ``make tutorials`` does and commits (the ``.ipynb`` beside each ``.py``, with its
outputs: figures, numbers, views). Each notebook runs in a fresh kernel of this interpreter, from
the repository root, one torch thread per process (``--threads``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("full", "smoke")


def read(path: Path) -> Any:
    """The notebook a percent-format ``path`` describes (jupytext), without outputs."""
    import jupytext

    return jupytext.read(path, fmt="py:percent")


def _kernel_manager(folder: Path) -> Any:
    """A kernel that runs this interpreter (the environment under test or being documented),
    whatever kernelspecs the machine's Jupyter paths hold."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "kernels" / "qkv"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "qkv", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(folder / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="qkv", kernel_spec_manager=specs)


def execute(
    notebook: Any, *, mode: str, threads: int = 1, timeout: int = 900, cwd: Path = ROOT
) -> Any:
    """Run every cell of ``notebook`` in a fresh kernel with ``QKV_TUTORIAL_MODE=mode`` (an error
    in a cell raises ``nbclient``'s ``CellExecutionError`` naming it); the notebook, with its
    outputs."""
    import nbclient

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    saved = {
        k: os.environ.get(k) for k in ("QKV_TUTORIAL_MODE", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    os.environ.update(
        QKV_TUTORIAL_MODE=mode, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)
    )
    try:
        with tempfile.TemporaryDirectory() as folder:
            client = nbclient.NotebookClient(
                notebook,
                km=_kernel_manager(Path(folder)),
                timeout=timeout,
                resources={"metadata": {"path": str(cwd)}},
            )
            client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return notebook


def main(argv: list[str] | None = None) -> int:
    import nbformat

    from qkv.studies.length import machine_description

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tutorials", nargs="+", type=Path, help="percent-format .py files")
    parser.add_argument("--mode", choices=MODES, default="full")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.tutorials if p.suffix != ".py" or not p.is_file()]
    if missing:
        parser.error(f"not a percent-format .py file: {', '.join(missing)}")
    for path in args.tutorials:
        start = time.perf_counter()
        notebook = execute(read(path), mode=args.mode, threads=args.threads)
        wall = time.perf_counter() - start
        if args.mode == "full":
            notebook.metadata["qkv"] = {
                "mode": args.mode,
                "seconds": round(wall, 1),
                "threads": args.threads,
                "machine": machine_description(),
            }
            out = path.with_suffix(".ipynb")
            partial = out.with_name(f".{out.name}.partial")
            nbformat.write(notebook, partial)
            partial.replace(out)
            print(f"{path}: {wall:.0f} s -> {out}")
        else:
            print(f"{path}: {wall:.1f} s ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

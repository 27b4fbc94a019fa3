"""Training runs through the real CLI, for benchmarks whose budget is CPU time: ``qkv train``
on one thread, then ``qkv evaluate``, the CPU seconds the training took, and the run's
``metrics.csv`` rows."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _call(command: list[str], handle, env: dict[str, str]) -> float:
    """Run ``command``; its CPU seconds (user + system, its threads and children)."""
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({code})")
    return usage.ru_utime + usage.ru_stime


def train_and_evaluate(
    config: Path,
    sets: list[str],
    out: Path,
    log_path: Path,
    resume: bool = False,
    evaluate: bool = True,
) -> float:
    """``qkv train config --set ...`` on one thread (into ``out``, overwriting), then
    ``qkv evaluate --model out``, both logged to ``log_path``; the CPU seconds this call's
    training took. With ``resume``, a run that left a checkpoint in ``out`` (a benchmark stopped
    by a signal, or at a session's end) and was started with the same ``sets`` (recorded beside
    it, ``OUT.sets.json``) continues from it with ``qkv train --resume`` instead,
    its budget clock continued and the ``train.*`` settings applied; the log is appended to. A
    run started so that has finished (its ``results.json`` written) is left as it is (0 seconds).
    ``evaluate=False`` leaves out ``qkv evaluate`` (a run only trained for a later one)."""
    marker = out.parent / f"{out.name}.sets.json"  # what the run in ``out`` was started with
    started = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else None
    resuming = resume and started == sets and (out / "checkpoints" / "latest.json").is_file()
    finished = out / ("results.json" if evaluate else "model.safetensors")
    if resuming and finished.is_file() and (evaluate or _stopped_by_budget(log_path)):
        return 0.0
    if resuming:
        budget = [f"--set={s}" for s in sets if s.startswith("train.")]
        train = [sys.executable, "-m", "qkv", "train", "--resume", str(out), "--quiet",
                 "--threads", "1", *budget]  # fmt: skip
    else:
        train = [sys.executable, "-m", "qkv", "train", str(config), "--overwrite", "--quiet",
                 "--threads", "1", *[f"--set={s}" for s in sets]]  # fmt: skip
    evaluation = [sys.executable, "-m", "qkv", "evaluate", "--model", str(out), "--quiet"]
    env = {**os.environ, **ONE_THREAD}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if not resuming:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(sets), encoding="utf-8")
    with open(log_path, "a" if resuming else "w", encoding="utf-8") as handle:
        cpu = _call(train, handle, env)
        if evaluate:
            _call(evaluation, handle, env)
        else:  # the mark that this run finished (what results.json is for an evaluated run)
            handle.write(f"{FINISHED}\n")
    return cpu


FINISHED = "harness: training finished"


def _stopped_by_budget(log_path: Path) -> bool:
    """Whether the log of a run trained without ``qkv evaluate`` says that it finished."""
    if not log_path.is_file():
        return False
    return FINISHED in log_path.read_text(encoding="utf-8", errors="replace").splitlines()


def metrics_rows(out: Path) -> list[dict[str, str]]:
    """The rows of ``out/metrics.csv``."""
    with open(out / "metrics.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))

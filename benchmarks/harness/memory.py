"""The peak resident memory of one call, each measured in a fresh process.

A benchmark runs itself again with arguments naming one measurement; that child builds the
module and its inputs, runs the call once under :func:`peak_rss` (how far the resident set rose
above what was there before it) and prints the result as JSON. The parent runs the children
with :func:`run_fresh_jobs` (small ones a few at a time, large ones alone) and reads the last
line of each one's output.

There is no warm-up call: an earlier call of another size changes glibc's dynamic mmap threshold
and with it how much freed memory stays resident, so the first call in a fresh process is the
only reproducible one.
"""

from __future__ import annotations

import gc
import json
import os
import re
import resource
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

from harness import SRC
from harness.report import log

MIB = 1 << 20
LARGE_BYTES = 1 << 30  # a job estimated to need this much runs alone


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _hwm_mib() -> float | None:
    """This process's own peak RSS (``VmHWM``), or ``None`` where /proc is unavailable.

    ``ru_maxrss`` alone is not enough in a spawned child: Linux records the high-water mark of the
    memory image that ``exec`` replaced (the parent's, copied by fork) as the child's starting
    ``ru_maxrss``, so a child of a large parent reports the parent's peak until it exceeds it.
    ``VmHWM`` is the same counter for the child's own image and is reset by ``clear_refs``.
    """
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s*(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else None


def _reset_peak() -> bool:
    """Reset the peak RSS to the current RSS (Linux ``clear_refs``), so import peaks don't hide."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss(call: Callable[[], object]) -> dict:
    """Run ``call`` once (its inputs already built) and return its peak resident memory above
    what was resident before, in MiB: ``VmHWM`` after ``clear_refs`` where Linux has them, else
    the rise of ``ru_maxrss``."""
    gc.collect()
    reset = _reset_peak()
    before, before_rusage = _hwm_mib(), _maxrss_mib()
    result = call()
    after, after_rusage = _hwm_mib(), _maxrss_mib()
    del result
    rusage_delta = after_rusage - before_rusage
    return {
        "peak_above_inputs_mib": after - before if reset and after else rusage_delta,
        "source": "VmHWM" if reset and after else "ru_maxrss",
        "ru_maxrss_delta_mib": rusage_delta,
        "baseline_mib": before,
        "ru_maxrss_baseline_mib": before_rusage,
    }


def source_env() -> dict[str, str]:
    """This process's environment with the checkout's ``src/`` first on ``PYTHONPATH``, for a
    child that imports qkv."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def run_fresh(argv: list[str], timeout: float = 1200) -> dict:
    """Run ``argv`` and return the JSON on the last line of its output, or ``{"status": ...}``
    saying how it failed."""
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=source_env()
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed (timeout)"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return {"status": f"failed (exit {proc.returncode}) {tail[0][:80]}"}
    return json.loads(lines[-1])


class FreshJob(Protocol):
    """One measurement in a fresh process."""

    @property
    def estimate(self) -> int: ...  # bytes it may need, for scheduling

    def argv(self) -> list[str]: ...

    def label(self) -> str: ...  # for the progress line


Job = TypeVar("Job", bound=FreshJob)


def run_fresh_jobs(jobs: list[Job], workers: int) -> dict[Job, dict]:
    """Small jobs ``workers`` at a time (memory is per process), large ones alone."""
    small = [j for j in jobs if j.estimate < LARGE_BYTES]
    large = [j for j in jobs if j.estimate >= LARGE_BYTES]
    results: dict[Job, dict] = {}

    def one(job: Job) -> None:
        results[job] = run_fresh(job.argv())
        got = results[job]
        shown = (
            f"{got['peak_above_inputs_mib']:.1f} MiB"
            if "peak_above_inputs_mib" in got
            else got["status"]
        )
        log(f"memory {job.label()}: {shown}")

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, small))
    for job in large:
        one(job)
    return results

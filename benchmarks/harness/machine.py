"""Where, when and how a benchmark ran: the machine (CPU model and features, cores, memory,
torch and Python), the CPU time other processes took meanwhile, the time and the command line.

A benchmark's section of ``docs/results/`` is only worth its numbers on the machine that produced
them, so every benchmark records these the same way: :func:`machine_facts` as a table,
:func:`machine_description` and :func:`machine_line` in a sentence.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import shlex
import sys
import time
from pathlib import Path

import torch

from qkv.hardware import UNKNOWN_MEMORY_BYTES, memory_bytes

SIMD = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # the flags that decide torch's CPU kernels


def cpu_info() -> tuple[str | None, set[str]]:
    """The CPU's model name and feature flags from ``/proc/cpuinfo`` (``None`` and no flags where
    it is not there)."""
    model, flags = None, set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    model = found.group(1).strip() if found else model
    found = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    flags = set(found.group(1).split()) if found else flags
    return model, flags


def machine_description() -> str:
    """CPU model and the features of :data:`SIMD` it has, core count and torch, e.g. ``AMD EPYC
    (avx2, avx512f, avx512_bf16), 2 cores, torch 2.13.0+cpu``: one model name can cover CPUs of
    different speeds (an AMD EPYC with AVX-512 or without), the features tell them apart."""
    model, flags = cpu_info()
    model = model or platform.processor() or platform.machine()
    simd = ", ".join(f for f in SIMD if f in flags) or f"none of {'/'.join(SIMD)}"
    return f"{model} ({simd}), {os.cpu_count()} cores, torch {torch.__version__}"


def machine_line(
    threads: int, versions: dict[str, str] | None = None, *, machine: str | None = None
) -> str:
    """``MACHINE, N threads, LIBRARY VERSION..., Python X.Y.Z``: the machine is
    :func:`machine_description` unless given (a GPU's name)."""
    parts = [machine or machine_description(), f"{threads} threads"]
    parts += [f"{name} {version}" for name, version in (versions or {}).items()]
    return ", ".join([*parts, f"Python {platform.python_version()}"])


def machine_facts() -> dict[str, str]:
    """The machine as a table's rows: CPU, its features, cores, memory, torch, threads, Python."""
    model, flags = cpu_info()
    simd = [f for f in SIMD if f in flags]
    memory = memory_bytes()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "CPU": model or "unknown",
        "CPU features": ", ".join(simd) or f"none of {'/'.join(SIMD)}",
        "cores": f"{os.cpu_count()} logical, {usable} usable by this process",
        "memory": "unknown" if memory == UNKNOWN_MEMORY_BYTES else f"{memory / (1 << 30):.1f} GiB",
        "torch": f"{torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()})",
        "torch threads": str(torch.get_num_threads()),
        "python": f"{platform.python_version()} on {platform.system()} {platform.release()}",
    }


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class CpuShare:
    """CPU time that other processes took during the run, from /proc/stat (Linux only)."""

    def __init__(self) -> None:
        self.start = (self._busy(), self._ours(), time.perf_counter())

    @staticmethod
    def _busy() -> float | None:
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except (OSError, IndexError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours() -> float:
        total = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            usage = resource.getrusage(who)
            total += usage.ru_utime + usage.ru_stime
        return total

    def others(self) -> float | None:
        """Fraction of all cores' time used by other processes since construction."""
        busy0, ours0, t0 = self.start
        busy1 = self._busy()
        if busy0 is None or busy1 is None:
            return None
        elapsed = (time.perf_counter() - t0) * (os.cpu_count() or 1)
        return max(0.0, (busy1 - busy0) - (self._ours() - ours0)) / max(elapsed, 1e-9)


def utc_stamp() -> str:
    """Now, as the sections date their runs: ``2026-11-21 18:57 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def exact_command() -> str:
    """This process's command line as it was run: its interpreter (relative where it lies below
    the working directory) and ``PYTHONPATH``."""
    exe = sys.executable
    try:
        rel = os.path.relpath(exe)
        exe = rel if not rel.startswith("..") else exe
    except ValueError:
        pass
    prefix = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    return prefix + shlex.join([exe, *sys.argv])


def script_command() -> str:
    """This process's command line as a reader would type it: ``PYTHONPATH=src python ARGV``."""
    return "PYTHONPATH=src python " + " ".join(sys.argv)


# The machine of the result records written before records named their own (``"machine"``).
EARLIER_MACHINE = "Intel(R) Xeon(R) Processor, 2 cores, torch 2.13.0+cpu"


def machines_sentence(records: dict[str, dict], current: str) -> str:
    """Which machine measured which records: ``current`` alone when every record is its, else
    each machine with the records it measured (a record without ``"machine"`` was measured on
    :data:`EARLIER_MACHINE`)."""
    by_machine: dict[str, list[str]] = {}
    for name, record in records.items():
        if isinstance(record, dict) and "cpu_minutes" in record:
            by_machine.setdefault(record.get("machine", EARLIER_MACHINE), []).append(name)
    if set(by_machine) <= {current}:
        return current
    return "; ".join(f"{machine} ({', '.join(sorted(names))})"
                     for machine, names in by_machine.items())  # fmt: skip

"""Seconds per call, from ``time.perf_counter`` samples.

Two ways, as the benchmarks report them. :func:`time_round_robin` takes the median of samples
from implementations interleaved in a rotating order (so drift on a shared machine hits all of
them alike), each sample averaging enough back-to-back calls to be timed, the garbage collector
off while it runs. :func:`best_of` is for calls that last seconds (a batch of generation or
encoding): the best of a few rounds, the order reversed each round.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MIN_SAMPLE_S = 0.02  # short calls are repeated back to back until one sample lasts this long
KEEP_FIRST_S = 1.0  # a first call this long is counted: shorter lengths already warmed its kernels


def timed(fn: Callable[[], object], calls: int = 1) -> float:
    """Seconds per call of ``fn``, over ``calls`` back-to-back calls."""
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed / calls


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)  # per call, one entry per sample
    calls: int = 1  # calls averaged in each sample


def time_round_robin(
    calls: dict[str, Callable[[], object]],
    reps: int,
    budget: float,
    min_reps: dict[str, int],
    keep_first: bool = True,
) -> dict[str, Samples]:
    """Time each implementation, interleaved (rotating order) so drift hits all of them alike.

    Each implementation is first called once as a warm-up; a warm-up over ``KEEP_FIRST_S`` is kept
    as a sample (shorter lengths warmed the same kernels already) unless ``keep_first`` is false
    (a cold process); otherwise a second, calibration call follows (kept as a sample when it took
    over ``KEEP_FIRST_S``). A sample averages enough back-to-back calls to last
    ``MIN_SAMPLE_S``; each implementation gets ``min(reps, max(min_reps, budget / sample))``
    samples.
    """
    result: dict[str, Samples] = {}
    target: dict[str, int] = {}
    for name, fn in calls.items():
        first = timed(fn)
        got = result[name] = Samples()
        if first >= KEEP_FIRST_S and keep_first:
            got.seconds.append(first)
        else:
            first = timed(fn)  # calibration: the warm-up call may include one-time costs
            got.calls = max(1, math.ceil(MIN_SAMPLE_S / max(first, 1e-6)))
            if first >= KEEP_FIRST_S:  # a warm single call: as good as any later sample
                got.seconds.append(first)
        wanted = math.ceil(budget / max(first * got.calls, 1e-6))
        target[name] = min(reps, max(min_reps.get(name, 1), wanted))
    order = list(calls)
    rnd = 0
    while any(len(result[n].seconds) < target[n] for n in order):
        shift = rnd % len(order)
        for name in order[shift:] + order[:shift]:
            if len(result[name].seconds) < target[name]:
                result[name].seconds.append(timed(calls[name], result[name].calls))
        rnd += 1
    return result


def summary(samples: Samples) -> dict:
    return {
        "ms": 1e3 * statistics.median(samples.seconds),
        "reps": len(samples.seconds),
        "calls": samples.calls,
    }


def ms_of(cell) -> float | None:
    """The median of a :func:`summary`, or ``None`` for a cell that was not timed (a string
    saying why)."""
    return cell["ms"] if isinstance(cell, dict) else None


def best_of(calls: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Each call's best time in seconds over ``reps`` rounds, run in turn (order reversed each
    round)."""
    best = dict.fromkeys(calls, float("inf"))
    names = list(calls)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            calls[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def best_time(fn: Callable[[], object], reps: int) -> float:
    """The best time in seconds of ``reps`` back-to-back calls of ``fn``."""
    return best_of({"": fn}, reps)[""]

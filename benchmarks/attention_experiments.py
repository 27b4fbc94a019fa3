"""The attention benchmark's experiments, each returning plain data for the report:

* Part 1: the four multi-head implementations timed over every length, batch, dtype, mask and
  mode (:func:`part1`), with each one's peak memory at batch 1 in float32 (:func:`part1_memory`);
* Part 1b: attention weights requested, qkv's chunked path against naive (:func:`part1b`);
* Part 2: the additive score against its naive form, timed in a fresh process (:func:`part2`);
* Part 3: bfloat16 accuracy against a float64 reference (:func:`part3_accuracy`);

and the sanity check that every implementation computes the same thing
(:func:`check_equivalence`). Peaks are measured by running ``attention.py --measure-memory`` in
a fresh process per :class:`MemJob` (:func:`measure_memory_child` is its body).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from attention_impls import (
    DTYPES,
    IMPLS,
    MASKS,
    MODES,
    additive_inputs,
    additive_runners,
    base_mha,
    mha_inputs,
    mha_runners,
    naive_peak_bytes,
)
from harness.memory import MIB, peak_rss, source_env
from harness.report import log
from harness.timing import summary, time_round_robin

SCRIPT = Path(__file__).resolve().with_name("attention.py")  # what the fresh processes run
DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
ADDITIVE = {"batch": 32, "length": 256, "dim": 512, "hidden": 512}
ADDITIVE_QUICK = {"batch": 4, "length": 64, "dim": 512, "hidden": 512}


@dataclass
class Config:
    lengths: list[int]
    batches: list[int]
    dtypes: list[str]
    masks: list[str]
    reps: int
    budget: float
    max_tokens: int
    naive_limit_gib: float
    memory: bool
    jobs: int
    quick: bool
    weights_lengths: list[int]
    additive: dict
    accuracy_length: int


def measure_memory_child(impl: str, dtype_name: str, mask: str, length: int, batch: int, mode: str):
    """Body of ``--measure-memory``: print the peak RSS above the inputs, in MiB, as JSON."""
    dtype = DTYPES[dtype_name]
    if impl.startswith("additive"):
        runner = additive_runners(ADDITIVE["dim"], ADDITIVE["hidden"])[impl]
        inputs = additive_inputs(batch, length, ADDITIVE["dim"])
    else:
        runner = mha_runners(base_mha(dtype))[impl]
        inputs = mha_inputs(batch, length, dtype, mask)
    peak = peak_rss(lambda: runner(inputs, mode))
    print(json.dumps({"impl": impl, **peak, "inputs_mib": inputs.nbytes() / MIB}))


@dataclass(frozen=True)
class MemJob:
    impl: str
    dtype: str
    mask: str
    length: int
    batch: int
    mode: str
    estimate: int = 0  # bytes, for scheduling

    def argv(self) -> list[str]:
        spec = [self.impl, self.dtype, self.mask, str(self.length), str(self.batch), self.mode]
        return [sys.executable, str(SCRIPT), "--measure-memory", *spec]

    def label(self) -> str:
        return f"{self.impl} {self.dtype} {self.mask} T={self.length} B={self.batch} {self.mode}"


def check_equivalence(dtype: torch.dtype) -> dict[str, float]:
    """Max |output - floor| of each implementation at a small size, per mask kind."""
    runners = mha_runners(base_mha(dtype))
    worst: dict[str, float] = {}
    for mask in MASKS:
        inputs = mha_inputs(2, 64, dtype, mask)
        with torch.no_grad():
            ref = runners["floor"].fn(inputs)[0].double()
            for name in ("qkv", "torch", "naive", "qkv-weights"):
                diff = (runners[name].fn(inputs)[0].double() - ref).abs().max().item()
                worst[name] = max(worst.get(name, 0.0), diff)
    return worst


def part1(cfg: Config) -> dict:
    """Timings of the four implementations over every configuration."""
    results: dict[tuple, dict] = {}
    for dtype_name in cfg.dtypes:
        dtype = DTYPES[dtype_name]
        runners = mha_runners(base_mha(dtype))
        for batch in cfg.batches:
            for length in cfg.lengths:
                if batch * length > cfg.max_tokens and batch > 1:
                    continue
                for mask in cfg.masks:
                    inputs = mha_inputs(batch, length, dtype, mask)
                    for mode in MODES:
                        calls = {}
                        row: dict[str, dict | str] = {}
                        for impl in IMPLS:
                            limit = cfg.naive_limit_gib * (1 << 30)
                            est = naive_peak_bytes(batch, length, dtype, mode, mask)
                            if impl == "naive" and est > limit:
                                row[impl] = "skipped (memory)"
                                continue
                            calls[impl] = lambda r=runners[impl], m=mode, i=inputs: r(i, m)
                        samples = time_round_robin(
                            calls, cfg.reps, cfg.budget, {"qkv": 3, "torch": 3, "floor": 3}
                        )
                        row.update({impl: summary(s) for impl, s in samples.items()})
                        results[(dtype_name, batch, length, mask, mode)] = row
                        shown = "  ".join(
                            f"{impl} {v['ms']:.2f}ms" if isinstance(v, dict) else f"{impl} {v}"
                            for impl, v in row.items()
                        )
                        log(f"{dtype_name} B={batch} T={length} {mask} {mode}: {shown}")
    return results


def memory_modes(cfg: Config) -> tuple[str, ...]:
    return ("fwdbwd",) if cfg.quick else MODES  # the smoke run spawns few processes


def part1_memory(cfg: Config) -> list[MemJob]:
    jobs = []
    lengths = cfg.lengths[:1] if cfg.quick else cfg.lengths
    masks = ["none"] if cfg.quick else cfg.masks
    for length in lengths:
        for mask in masks:
            for mode in memory_modes(cfg):
                for impl in IMPLS:
                    est = naive_peak_bytes(1, length, torch.float32, mode, mask)
                    if impl == "naive" and est > cfg.naive_limit_gib * (1 << 30):
                        continue
                    est = est if impl == "naive" else 0
                    jobs.append(MemJob(impl, "float32", mask, length, 1, mode, est))
    return jobs


def part1b(cfg: Config) -> dict:
    runners = mha_runners(base_mha(torch.float32))
    results = {}
    for length in cfg.weights_lengths:
        inputs = mha_inputs(1, length, torch.float32, "none")
        for mode in MODES:
            calls = {
                impl: (lambda r=runners[impl], m=mode, i=inputs: r(i, m))
                for impl in ("qkv-weights", "naive-weights")
            }
            samples = time_round_robin(calls, cfg.reps, cfg.budget, {})
            results[(length, mode)] = {impl: summary(s) for impl, s in samples.items()}
            log(
                f"weights T={length} {mode}: "
                + "  ".join(f"{k} {v['ms']:.1f}ms" for k, v in results[(length, mode)].items())
            )
    return results


def part1b_memory(cfg: Config) -> list[MemJob]:
    return [
        MemJob(
            impl,
            "float32",
            "none",
            length,
            1,
            mode,
            naive_peak_bytes(1, length, torch.float32, mode, "none"),
        )
        for length in cfg.weights_lengths
        for mode in memory_modes(cfg)
        for impl in ("qkv-weights", "naive-weights")
    ]


def part2(cfg: Config) -> dict:
    """Additive score timings; run in a fresh process by :func:`part2_fresh`."""
    sizes = cfg.additive
    runners = additive_runners(sizes["dim"], sizes["hidden"])
    small = additive_inputs(2, sizes["length"], sizes["dim"])  # equality check, batch 2
    with torch.no_grad():
        ours = runners["additive-qkv"].fn(small)[0]
        ref = runners["additive-naive"].fn(small)[0]
        max_diff = (ours - ref).abs().max().item()
    del small, ours, ref
    inputs = additive_inputs(sizes["batch"], sizes["length"], sizes["dim"])
    results: dict = {"max_abs_diff": max_diff}
    for mode in MODES:
        calls = {name: (lambda r=r, m=mode: r(inputs, m)) for name, r in runners.items()}
        # A cold process: the first call includes one-time initialisation, never keep it.
        samples = time_round_robin(calls, cfg.reps, cfg.budget, {}, keep_first=False)
        results[mode] = {impl: summary(s) for impl, s in samples.items()}
        log(
            f"additive {mode}: "
            + "  ".join(f"{k} {v['ms']:.1f}ms" for k, v in results[mode].items())
        )
    return results


def part2_fresh(cfg: Config) -> dict:
    """Run :func:`part2` in a fresh process.

    Part 1 leaves glibc's dynamic mmap threshold at its maximum (32 MiB), after which the additive
    score's 16 MiB per-chunk temporaries come from the heap instead of mmap, which changes both
    its resident memory and its time; a fresh process makes the numbers independent of what ran
    before.
    """
    argv = [sys.executable, str(SCRIPT), "--time-additive"]
    argv += ["--reps", str(cfg.reps), "--budget", str(cfg.budget)] + ["--quick"] * cfg.quick
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=source_env(), check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def part2_memory(cfg: Config) -> list[MemJob]:
    s = cfg.additive
    naive_bytes = s["batch"] * s["length"] ** 2 * s["hidden"] * 4 * 3
    return [
        MemJob(impl, "float32", "none", s["length"], s["batch"], mode, naive_bytes)
        for mode in memory_modes(cfg)
        for impl in ("additive-qkv", "additive-naive")
    ]


def part3_accuracy(length: int) -> dict:
    """Max |error| against float64, same bf16-representable weights and input for every run."""
    mha_bf16 = base_mha(torch.bfloat16)
    ref_runners = mha_runners(copy.deepcopy(mha_bf16).to(torch.float64))
    by_dtype = {
        "bfloat16": mha_runners(mha_bf16),
        "float32": mha_runners(copy.deepcopy(mha_bf16).to(torch.float32)),
    }
    results: dict = {}
    for mask in MASKS:
        inputs = mha_inputs(1, length, torch.bfloat16, mask)  # bf16-representable input
        with torch.no_grad():
            ref_inputs = dataclasses.replace(inputs, x=inputs.x.detach().double())
            ref = ref_runners["floor"].fn(ref_inputs)[0]
            check = (ref_runners["naive"].fn(ref_inputs)[0] - ref).abs().max().item()
            row = {"ref_max_abs": ref.abs().max().item(), "ref_check": check}
            for dtype_name, runners in by_dtype.items():
                x = dataclasses.replace(inputs, x=inputs.x.detach().to(DTYPES[dtype_name]))
                for impl in ("qkv", "qkv-weights", "floor", "torch", "naive"):
                    out = runners[impl].fn(x)[0].double()
                    row[(impl, dtype_name)] = (out - ref).abs().max().item()
        results[mask] = row
        log(f"accuracy T={length} {mask}: bf16 qkv {row[('qkv', 'bfloat16')]:.2e}")
    return results

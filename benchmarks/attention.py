"""Benchmark qkv's attention against PyTorch, a naive implementation and the SDPA floor.

One run on one machine measures everything and writes a markdown report (the section between
``<!-- attention:begin -->`` and ``<!-- attention:end -->`` of ``--out``, so other benchmarks can
share the file):

* Part 1: multi-head self-attention (d_model 512, 8 heads of 64), batch 1 and 4, float32 and
  bfloat16, no mask / causal / key padding, forward and forward+backward, four implementations
  with identical weights: qkv's ``MultiHeadAttention``, ``torch.nn.MultiheadAttention``, the naive
  textbook implementation and the floor (the same projections around a bare
  ``F.scaled_dot_product_attention``). Peak memory of each at batch 1 in float32, each in a fresh
  process.
* Part 1b: attention weights requested (qkv's chunked path against the naive implementation).
* Part 2: the additive (Bahdanau) score against its naive broadcast form.
* Part 3: bfloat16 against SDPA's own bfloat16, and bfloat16 accuracy against float64.

Usage::

    PYTHONPATH=src python benchmarks/attention.py --quick --out /tmp/bench.md   # smoke run
    PYTHONPATH=src python benchmarks/attention.py                               # full run
    PYTHONPATH=src python benchmarks/attention.py --lengths 128,256,512,1024,2048

The script also runs itself as ``--measure-memory IMPL DTYPE MASK T B MODE`` to measure one peak
in a fresh process (and as ``--time-additive`` for Part 2). Progress goes to stderr.

This file is the command line; the implementations are in ``attention_impls.py``, the
experiments in ``attention_experiments.py``, the targets in ``attention_targets.py`` and the
report in ``attention_render.py``. Timing, fresh-process peaks, machine facts and the section
writer are the benchmarks' shared ``harness`` package.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from attention_experiments import (
    ADDITIVE,
    ADDITIVE_QUICK,
    DEFAULT_LENGTHS,
    Config,
    check_equivalence,
    measure_memory_child,
    part1,
    part1_memory,
    part1b,
    part1b_memory,
    part2,
    part2_fresh,
    part2_memory,
    part3_accuracy,
)
from attention_impls import DTYPES, MASKS
from attention_render import BEGIN, END, render
from harness import ROOT
from harness.machine import CpuShare, load_average, machine_facts, utc_stamp
from harness.memory import run_fresh_jobs
from harness.report import log, splice


def json_ready(obj):
    if isinstance(obj, dict):
        return {
            (" ".join(map(str, k)) if isinstance(k, tuple) else str(k)): json_ready(v)
            for k, v in obj.items()
        }
    return obj


def parse_ints(text: str) -> list[int]:
    return [int(p) for p in re.split(r"[,\s]+", text.strip()) if p]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, seconds")
    parser.add_argument(
        "--out",
        type=Path,
        help="markdown report (default docs/results/attention-speed.md; with --quick, stdout only "
        "unless given)",
    )
    parser.add_argument("--json", type=Path, help="also dump the raw results as JSON here")
    parser.add_argument("--lengths", type=parse_ints, help="sequence lengths, e.g. 128,256,512")
    parser.add_argument("--batches", type=parse_ints, help="batch sizes (default 1,4)")
    parser.add_argument("--dtypes", help="comma-separated subset of float32,bfloat16")
    parser.add_argument("--masks", help="comma-separated subset of none,causal,padding")
    parser.add_argument(
        "--reps", type=int, help="maximum timed samples per implementation (default 5)"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="target seconds of samples per implementation and config (default 2)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=8192,
        help="run B > 1 only where B*T <= this (default 8192)",
    )
    parser.add_argument(
        "--naive-limit-gib",
        type=float,
        default=16.0,
        help="skip naive runs estimated to need more (default 16)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the fresh-process peaks")
    parser.add_argument("--jobs", type=int, default=2, help="concurrent small memory processes")
    parser.add_argument("--time-additive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--measure-memory",
        nargs=6,
        metavar=("IMPL", "DTYPE", "MASK", "T", "B", "MODE"),
        help=argparse.SUPPRESS,
    )
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace) -> Config:
    quick = args.quick
    lengths = args.lengths or ([128, 256] if quick else list(DEFAULT_LENGTHS))
    dtypes = args.dtypes.split(",") if args.dtypes else list(DTYPES)
    masks = args.masks.split(",") if args.masks else list(MASKS)
    for name, chosen, allowed in (("dtype", dtypes, DTYPES), ("mask", masks, MASKS)):
        bad = [c for c in chosen if c not in allowed]
        if bad:
            raise SystemExit(f"unknown {name}(s) {bad}; choose from {list(allowed)}")
    weights_lengths = [t for t in lengths if 1024 <= t <= 4096]
    if quick:
        weights_lengths = [max(lengths)]
    accuracy = 1024 if not quick else min(lengths)
    return Config(
        lengths=sorted(lengths),
        batches=args.batches or ([1] if quick else [1, 4]),
        dtypes=dtypes,
        masks=masks,
        reps=args.reps or (2 if quick else 5),
        budget=args.budget if args.budget is not None else (0.05 if quick else 2.0),
        max_tokens=args.max_tokens,
        naive_limit_gib=args.naive_limit_gib,
        memory=not args.no_memory,
        jobs=args.jobs,
        quick=quick,
        weights_lengths=weights_lengths,
        additive=dict(ADDITIVE_QUICK if quick else ADDITIVE),
        accuracy_length=accuracy,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.time_additive:
        print(json.dumps(part2(make_config(args))))
        return 0
    if args.measure_memory:
        impl, dtype, mask, length, batch, mode = args.measure_memory
        measure_memory_child(impl, dtype, mask, int(length), int(batch), mode)
        return 0
    cfg = make_config(args)
    out_path = (
        args.out
        if args.out is not None
        else (None if cfg.quick else ROOT / "docs" / "results" / "attention-speed.md")
    )
    started = utc_stamp()
    t0 = time.perf_counter()
    share = CpuShare()
    facts = machine_facts()
    facts["date"] = started
    facts["load average at start"] = load_average()
    log(f"attention benchmark: {cfg}")

    equiv = {name: check_equivalence(DTYPES[name]) for name in cfg.dtypes}
    log(f"equivalence (max |out - floor|): {equiv}")
    p1 = part1(cfg)
    p1b = part1b(cfg)
    p2 = part2_fresh(cfg)
    acc = part3_accuracy(cfg.accuracy_length)
    mem, p1b_mem, p2_mem = {}, {}, {}
    if cfg.memory:
        jobs1, jobs1b, jobs2 = part1_memory(cfg), part1b_memory(cfg), part2_memory(cfg)
        log(f"peak memory: {len(jobs1) + len(jobs1b) + len(jobs2)} fresh processes")
        every = run_fresh_jobs(jobs1 + jobs1b + jobs2, cfg.jobs)
        mem = {j: every[j] for j in jobs1}
        p1b_mem = {j: every[j] for j in jobs1b}
        p2_mem = {j: every[j] for j in jobs2}
    wall = time.perf_counter() - t0
    facts["load average at end"] = load_average()
    others = share.others()
    if others is not None:
        facts["CPU taken by other processes during the run"] = f"{100 * others:.1f}%"
    report = render(
        cfg, facts, started, wall, equiv, p1, mem, p1b, p1b_mem, p2, p2_mem, acc, others
    )
    if out_path is None:
        sys.stdout.write(report)
    else:
        splice(out_path, report, BEGIN, END)
        log(f"wrote {out_path}")
    if args.json:
        raw = {
            "part1": p1,
            "part1_memory": {
                " ".join(map(str, (j.impl, j.mask, j.length, j.mode))): v for j, v in mem.items()
            },
            "part1b": p1b,
            "part1b_memory": {
                " ".join(map(str, (j.impl, j.length, j.mode))): v for j, v in p1b_mem.items()
            },
            "part2": p2,
            "part2_memory": {" ".join((j.impl, j.mode)): v for j, v in p2_mem.items()},
            "accuracy": acc,
            "wall_s": wall,
        }
        args.json.write_text(json.dumps(json_ready(raw), indent=1))
    log(f"done in {wall / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())

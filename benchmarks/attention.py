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
in a fresh process. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import gc
import json
import math
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
try:
    import qkv.attention as qa
except ImportError:  # not installed: use the source tree next to this script
    sys.path.insert(0, str(ROOT / "src"))
    import qkv.attention as qa

from report_section import log, splice  # noqa: E402

BEGIN, END = "<!-- attention:begin -->", "<!-- attention:end -->"
D_MODEL, HEADS = 512, 8
HEAD_DIM = D_MODEL // HEADS
IMPLS = ("qkv", "torch", "naive", "floor")
IMPL_NAMES = {
    "qkv": "qkv MHA",
    "torch": "torch MHA",
    "naive": "naive",
    "floor": "floor (SDPA)",
}
MASKS = ("none", "causal", "padding")
MODES = ("fwd", "fwdbwd")
MODE_NAMES = {"fwd": "fwd", "fwdbwd": "fwd+bwd"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
ADDITIVE = {"batch": 32, "length": 256, "dim": 512, "hidden": 512}
ADDITIVE_QUICK = {"batch": 4, "length": 64, "dim": 512, "hidden": 512}
MIN_SAMPLE_S = 0.02  # short calls are repeated back to back until one sample lasts this long
KEEP_FIRST_S = 1.0  # a first call this long is counted: shorter lengths already warmed its kernels
NOISE = 0.03  # relative timing noise on a shared 2-core machine
MIB = 1 << 20


# --------------------------------------------------------------------------------------------
# Implementations
# --------------------------------------------------------------------------------------------


class _Projections(nn.Module):
    """The four projections of a ``torch.nn.MultiheadAttention``, as plain parameters."""

    def __init__(self, mha: nn.MultiheadAttention) -> None:
        super().__init__()
        wq, wk, wv = mha.in_proj_weight.detach().clone().chunk(3)
        bq, bk, bv = mha.in_proj_bias.detach().clone().chunk(3)
        self.wq, self.wk, self.wv = nn.Parameter(wq), nn.Parameter(wk), nn.Parameter(wv)
        self.bq, self.bk, self.bv = nn.Parameter(bq), nn.Parameter(bk), nn.Parameter(bv)
        self.wo = nn.Parameter(mha.out_proj.weight.detach().clone())
        self.bo = nn.Parameter(mha.out_proj.bias.detach().clone())

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape

        def split(y: Tensor) -> Tensor:
            return y.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)  # (B, H, T, dh)

        q = split(F.linear(x, self.wq, self.bq))
        k = split(F.linear(x, self.wk, self.bk))
        v = split(F.linear(x, self.wv, self.bv))
        return q, k, v

    def out(self, context: Tensor) -> Tensor:
        b, _, t, _ = context.shape
        return F.linear(context.transpose(1, 2).reshape(b, t, D_MODEL), self.wo, self.bo)


class Naive(_Projections):
    """The textbook implementation (the practice qkv replaces): full scores, -1e10 fill."""

    def forward(self, x: Tensor, keep: Tensor | None, need_weights: bool = False):
        q, k, v = self.heads(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, T)
        if keep is not None:
            scores = scores.masked_fill(~keep, -1e10)
        weights = scores.softmax(dim=-1)
        return self.out(weights @ v), (weights if need_weights else None)


class Floor(_Projections):
    """The same projections around a bare ``F.scaled_dot_product_attention``."""

    def forward(self, x: Tensor, keep: Tensor | None, is_causal: bool):
        q, k, v = self.heads(x)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=is_causal)
        return self.out(context), None


@dataclass
class Inputs:
    """One configuration's inputs, shared by every implementation."""

    x: Tensor | None = None  # (B, T, D) self-attention input
    mask: str = "none"
    keep: Tensor | None = None  # qkv / SDPA keep-mask (B, 1, 1, T) for padding
    keep_naive: Tensor | None = None  # naive: (T, T) causal or (B, 1, 1, T) padding keep-mask
    key_padding: Tensor | None = None  # torch MHA: (B, T), True = ignore
    torch_causal: Tensor | None = None  # torch MHA: (T, T), True = masked
    q: Tensor | None = None  # additive score query (B, Tq, Dq)
    k: Tensor | None = None  # additive score key (B, Tk, Dk)

    @property
    def causal(self) -> bool:
        return self.mask == "causal"

    def leaves(self) -> list[Tensor]:
        return [t for t in (self.x, self.q, self.k) if t is not None]

    def nbytes(self) -> int:
        tensors = (self.x, self.keep, self.keep_naive, self.key_padding, self.torch_causal)
        return sum(
            t.numel() * t.element_size() for t in (*tensors, self.q, self.k) if t is not None
        )


def mha_inputs(batch: int, length: int, dtype: torch.dtype, mask: str, seed: int = 1) -> Inputs:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, D_MODEL, generator=gen).to(dtype).requires_grad_()
    inputs = Inputs(x=x, mask=mask)
    if mask == "causal":
        tril = torch.ones(length, length, dtype=torch.bool).tril()
        inputs.keep_naive, inputs.torch_causal = tril, ~tril
    elif mask == "padding":
        lengths = torch.full((batch,), length * 3 // 4)  # the last quarter of each row is padding
        keep = qa.padding_mask(lengths, length)  # (B, 1, 1, T)
        inputs.keep = inputs.keep_naive = keep
        inputs.key_padding = ~keep[:, 0, 0, :]
    elif mask != "none":
        raise ValueError(f"unknown mask kind {mask!r}")
    return inputs


def additive_inputs(batch: int, length: int, dim: int, seed: int = 1) -> Inputs:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, length, dim, generator=gen).requires_grad_()
    k = torch.randn(batch, length, dim, generator=gen).requires_grad_()
    return Inputs(q=q, k=k)


def base_mha(dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    nn.init.normal_(mha.in_proj_bias, std=0.02)  # non-zero biases, so they are checked too
    nn.init.normal_(mha.out_proj.bias, std=0.02)
    return mha.to(dtype).eval()


Impl = Callable[[Inputs], tuple[Tensor, Tensor | None]]


@dataclass
class Runner:
    """An implementation: ``fn(inputs) -> (output, weights or None)`` and its parameters."""

    fn: Impl
    params: list[nn.Parameter] = field(default_factory=list)

    def __call__(self, inputs: Inputs, mode: str) -> object:
        if mode == "fwd":
            with torch.no_grad():
                return self.fn(inputs)
        for tensor in (*self.params, *inputs.leaves()):
            tensor.grad = None
        out, _ = self.fn(inputs)
        out.sum().backward()
        return None


def mha_runners(mha: nn.MultiheadAttention) -> dict[str, Runner]:
    """All implementations, with weights copied from ``mha`` (already in the wanted dtype)."""
    torch_mha = copy.deepcopy(mha).eval()
    ours = qa.MultiHeadAttention.from_torch(mha).eval()
    naive, floor = Naive(mha).eval(), Floor(mha).eval()

    def run_qkv(i: Inputs):
        return ours(i.x, keep=i.keep, is_causal=i.causal).context, None

    def run_qkv_weights(i: Inputs):
        out = ours(i.x, keep=i.keep, is_causal=i.causal, need_weights=True)
        return out.context, out.weights

    def run_torch(i: Inputs):
        out, _ = torch_mha(
            i.x,
            i.x,
            i.x,
            key_padding_mask=i.key_padding,
            attn_mask=i.torch_causal,
            is_causal=i.causal,
            need_weights=False,
        )
        return out, None

    def run_naive(i: Inputs):
        return naive(i.x, i.keep_naive)

    def run_naive_weights(i: Inputs):
        return naive(i.x, i.keep_naive, need_weights=True)

    def run_floor(i: Inputs):
        return floor(i.x, i.keep, i.causal)

    return {
        "qkv": Runner(run_qkv, list(ours.parameters())),
        "torch": Runner(run_torch, list(torch_mha.parameters())),
        "naive": Runner(run_naive, list(naive.parameters())),
        "floor": Runner(run_floor, list(floor.parameters())),
        "qkv-weights": Runner(run_qkv_weights, list(ours.parameters())),
        "naive-weights": Runner(run_naive_weights, list(naive.parameters())),
    }


def additive_runners(dim: int, hidden: int, seed: int = 0) -> dict[str, Runner]:
    torch.manual_seed(seed)
    ours = qa.Additive(dim, dim, hidden)
    ref = copy.deepcopy(ours)

    def run_qkv(i: Inputs):
        return ours(i.q, i.k), None

    def run_naive(i: Inputs):  # v(tanh(W q[:, :, None] + U k[:, None])).squeeze(-1)
        return ref.v(
            torch.tanh(ref.query_proj(i.q[:, :, None]) + ref.key_proj(i.k[:, None]))
        ).squeeze(-1), None

    return {
        "additive-qkv": Runner(run_qkv, list(ours.parameters())),
        "additive-naive": Runner(run_naive, list(ref.parameters())),
    }


def naive_peak_bytes(batch: int, length: int, dtype: torch.dtype, mode: str, mask: str) -> int:
    """A generous estimate of the naive implementation's peak: a few (B, H, T, T) tensors."""
    scores = batch * HEADS * length * length * torch.finfo(dtype).bits // 8
    copies = (2 if mode == "fwd" else 4) + (mask != "none")
    return copies * scores


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Peak memory in a fresh process
# --------------------------------------------------------------------------------------------


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


def measure_memory_child(impl: str, dtype_name: str, mask: str, length: int, batch: int, mode: str):
    """Body of ``--measure-memory``: print the peak RSS above the inputs, in MiB, as JSON."""
    dtype = DTYPES[dtype_name]
    if impl.startswith("additive"):
        runner = additive_runners(ADDITIVE["dim"], ADDITIVE["hidden"])[impl]
        inputs = additive_inputs(batch, length, ADDITIVE["dim"])
    else:
        runner = mha_runners(base_mha(dtype))[impl]
        inputs = mha_inputs(batch, length, dtype, mask)
    # No warm-up call: an earlier call of another size changes glibc's dynamic mmap threshold and
    # with it how much freed memory stays resident, so the first call in a fresh process is the
    # only reproducible one.
    gc.collect()
    reset = _reset_peak()
    before, before_rusage = _hwm_mib(), _maxrss_mib()
    result = runner(inputs, mode)
    after, after_rusage = _hwm_mib(), _maxrss_mib()
    del result
    rusage_delta = after_rusage - before_rusage
    print(
        json.dumps(
            {
                "impl": impl,
                "peak_above_inputs_mib": after - before if reset and after else rusage_delta,
                "source": "VmHWM" if reset and after else "ru_maxrss",
                "ru_maxrss_delta_mib": rusage_delta,
                "baseline_mib": before,
                "ru_maxrss_baseline_mib": before_rusage,
                "inputs_mib": inputs.nbytes() / MIB,
            }
        )
    )


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
        return [sys.executable, str(Path(__file__).resolve()), "--measure-memory", *spec]


def run_mem_job(job: MemJob) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(job.argv(), capture_output=True, text=True, timeout=1200, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "failed (timeout)"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return {"status": f"failed (exit {proc.returncode}) {tail[0][:80]}"}
    return json.loads(lines[-1])


def run_mem_jobs(jobs: list[MemJob], workers: int) -> dict[MemJob, dict]:
    """Small jobs two at a time (memory is per process), large ones alone."""
    small = [j for j in jobs if j.estimate < 1 << 30]
    large = [j for j in jobs if j.estimate >= 1 << 30]
    results: dict[MemJob, dict] = {}

    def one(job: MemJob) -> None:
        results[job] = run_mem_job(job)
        got = results[job]
        shown = (
            f"{got['peak_above_inputs_mib']:.1f} MiB"
            if "peak_above_inputs_mib" in got
            else got["status"]
        )
        log(
            f"memory {job.impl} {job.dtype} {job.mask} T={job.length} B={job.batch} "
            f"{job.mode}: {shown}"
        )

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, small))
    for job in large:
        one(job)
    return results


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


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
    argv = [sys.executable, str(Path(__file__).resolve()), "--time-additive"]
    argv += ["--reps", str(cfg.reps), "--budget", str(cfg.budget)] + ["--quick"] * cfg.quick
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env, check=True)
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


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def machine_facts() -> dict[str, str]:
    model, flags = "unknown", set()
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        model = found.group(1).strip() if found else model
        found = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
        flags = set(found.group(1).split()) if found else flags
    except OSError:
        pass
    simd = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    memory = "unknown"
    try:
        found = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
        memory = f"{int(found.group(1)) / (1 << 20):.1f} GiB" if found else memory
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "CPU": model,
        "CPU features": ", ".join(simd) or "none of avx2/avx512f/avx512_bf16/amx_bf16",
        "cores": f"{os.cpu_count()} logical, {usable} usable by this process",
        "memory": memory,
        "torch": f"{torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()})",
        "torch threads": str(torch.get_num_threads()),
        "python": f"{platform.python_version()} on {platform.system()} {platform.release()}",
    }


def command_line() -> str:
    exe = sys.executable
    try:
        rel = os.path.relpath(exe)
        exe = rel if not rel.startswith("..") else exe
    except ValueError:
        pass
    prefix = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    return prefix + shlex.join([exe, *sys.argv])


def fms(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fratio(value: float | None, bad: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value:.2f}"
    return f"**{text}**" if bad else text


def ms_of(cell) -> float | None:
    return cell["ms"] if isinstance(cell, dict) else None


def status(ok: bool, miss: float | None = None) -> str:
    """``yes``/``no``; a timing miss within the noise band is flagged as such."""
    if ok:
        return "yes"
    if miss is not None and miss <= NOISE:
        return f"no (misses by {100 * miss:.1f}%, within timing noise)"
    return "no"


def evaluate_targets(p1: dict, mem: dict, p2: dict, p2_mem: dict) -> list[tuple[str, str, str]]:
    rows = []

    def worst_ratio(num: str, den: str, filt=lambda key: True):
        worst, where, total = None, None, 0
        for key, row in p1.items():
            a, b = ms_of(row.get(num)), ms_of(row.get(den))
            if a is None or b is None or not filt(key):
                continue
            total += 1
            ratio = a / b
            if worst is None or ratio > worst:
                worst, where = ratio, key
        return worst, where, total

    def where_text(key) -> str:
        dtype, batch, length, mask, mode = key
        return f"{dtype} B={batch} T={length} {mask} {MODE_NAMES[mode]}"

    def over(num, den, bound):
        return sum(
            1
            for row in p1.values()
            if ms_of(row.get(num))
            and ms_of(row.get(den))
            and ms_of(row[num]) / ms_of(row[den]) > bound
        )

    # (1) qkv within 1.05x of the floor.
    worst, where, total = worst_ratio("qkv", "floor")
    if worst is None:
        rows.append(("(1) qkv MHA within 1.05x of the floor, every config", "not measured", "-"))
    else:
        n = over("qkv", "floor", 1.05)
        rows.append(
            (
                "(1) qkv MHA ≤ 1.05x the floor (projections + SDPA) at every length, mask, "
                "fwd and fwd+bwd (no weights)",
                f"worst {worst:.3f}x ({where_text(where)}); {n} of {total} configs above 1.05x",
                status(worst <= 1.05, worst / 1.05 - 1),
            )
        )
    # (2) never slower than torch MHA.
    worst, where, total = worst_ratio("qkv", "torch")
    if worst is not None:
        n = over("qkv", "torch", 1.0)
        rows.append(
            (
                "(2) qkv MHA never slower than torch.nn.MultiheadAttention",
                f"worst qkv/torch {worst:.3f}x ({where_text(where)}); "
                f"{n} of {total} configs above 1.00x",
                status(worst <= 1.0, worst - 1.0),
            )
        )
    # (3) at least 2x / 3x faster than naive at length >= 2048.
    long_keys = [k for k in p1 if k[2] >= 2048]
    if not long_keys:
        rows.append(
            (
                "(3) ≥ 2x (fwd+bwd) / 3x (fwd) faster than naive at T ≥ 2048",
                "not measured (no T ≥ 2048)",
                "-",
            )
        )
    else:
        parts, ok, skipped = [], True, 0
        for mode, bound in (("fwdbwd", 2.0), ("fwd", 3.0)):
            best = None
            for key in long_keys:
                if key[4] != mode:
                    continue
                row = p1[key]
                if not isinstance(row.get("naive"), dict):
                    skipped += 1
                    continue
                speedup = ms_of(row["naive"]) / ms_of(row["qkv"])
                if best is None or speedup < best[0]:
                    best = (speedup, key)
            if best is not None:
                ok &= best[0] >= bound
                parts.append(f"{MODE_NAMES[mode]} min {best[0]:.2f}x ({where_text(best[1])})")
        note = f"; naive skipped (memory) in {skipped} configs" if skipped else ""
        rows.append(
            (
                "(3) ≥ 2x faster than naive fwd+bwd and ≥ 3x fwd at T ≥ 2048",
                "; ".join(parts) + note,
                status(ok),
            )
        )
    # (4) peak memory at 8192.
    at8k = {k: v for k, v in mem.items() if k.impl == "qkv" and k.length == 8192 and k.batch == 1}
    if not at8k:
        rows.append(
            (
                "(4) qkv peak memory at T = 8192 (B=1) < 128 MiB above the inputs",
                "not measured (run without --no-memory and with 8192 in --lengths)",
                "-",
            )
        )
    else:
        values = {k: v.get("peak_above_inputs_mib") for k, v in at8k.items()}
        if any(v is None for v in values.values()):
            rows.append(("(4) qkv peak memory at T = 8192 < 128 MiB", "a measurement failed", "no"))
        else:
            job, peak = max(values.items(), key=lambda kv: kv[1])
            rows.append(
                (
                    "(4) qkv peak memory at T = 8192 (B=1, float32) < 128 MiB above the inputs",
                    f"max {peak:.1f} MiB ({job.mask} {MODE_NAMES[job.mode]}) "
                    f"over {len(values)} runs",
                    status(peak < 128),
                )
            )
    # (5) bf16 at least 1.5x faster than SDPA bf16.
    keys = [k for k in p1 if k[0] == "bfloat16" and k[2] >= 1024]
    speedups = [
        (ms_of(p1[k]["floor"]) / ms_of(p1[k]["qkv"]), k)
        for k in keys
        if ms_of(p1[k].get("floor")) and ms_of(p1[k].get("qkv"))
    ]
    if not speedups:
        rows.append(("(5) bf16 ≥ 1.5x faster than SDPA bf16 at T ≥ 1024", "not measured", "-"))
    else:
        low, key = min(speedups)
        high, _ = max(speedups)
        rows.append(
            (
                "(5) qkv bfloat16 ≥ 1.5x faster than SDPA's own bfloat16 (the floor) at T ≥ 1024",
                f"speed-up floor/qkv from {low:.2f}x ({where_text(key)}) to {high:.2f}x",
                status(low >= 1.5),
            )
        )
    # (6) Additive memory and time.
    mem_ratio = {}
    for mode in MODES:
        got = {j.impl: v for j, v in p2_mem.items() if j.mode == mode}
        a = got.get("additive-qkv", {}).get("peak_above_inputs_mib")
        b = got.get("additive-naive", {}).get("peak_above_inputs_mib")
        if a and b:
            mem_ratio[mode] = b / a
    time_ratio = {
        mode: ms_of(p2[mode]["additive-qkv"]) / ms_of(p2[mode]["additive-naive"]) for mode in MODES
    }
    text = "; ".join(
        f"{MODE_NAMES[m]}: time qkv/naive {time_ratio[m]:.2f}x"
        + (f", memory naive/qkv {mem_ratio[m]:.1f}x" if m in mem_ratio else ", memory not measured")
        for m in MODES
    )
    if not p2_mem:
        rows.append(("(6) Additive score memory ≤ 1/8 of naive at ≤ 1.2x its time", text, "-"))
        return rows
    ok = all(r <= 1.2 for r in time_ratio.values()) and len(mem_ratio) == len(MODES)
    ok = ok and all(r >= 8 for r in mem_ratio.values())
    worst_time = max(time_ratio.values())
    miss = worst_time / 1.2 - 1 if all(r >= 8 for r in mem_ratio.values()) and mem_ratio else None
    rows.append(
        ("(6) Additive score memory ≤ 1/8 of naive at ≤ 1.2x its time", text, status(ok, miss))
    )
    return rows


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render(
    cfg: Config,
    facts: dict,
    started: str,
    wall: float,
    equiv: dict,
    p1: dict,
    mem: dict,
    p1b: dict,
    p1b_mem: dict,
    p2: dict,
    p2_mem: dict,
    acc: dict,
    others: float | None,
) -> str:
    out: list[str] = [BEGIN, "## Attention", ""]
    out += [
        f"Generated by `benchmarks/attention.py` on {started} in {wall / 60:.1f} min of wall time.",
        "",
        "Command:",
        "",
        "```",
        command_line(),
        "```",
        "",
    ]
    out += table(["machine", ""], [[k, v] for k, v in facts.items()])
    if others is not None and others > 0.05:
        out += [
            "",
            f"**Warning:** other processes used {100 * others:.0f}% of the machine's CPU time "
            "during this run, so timings are less reliable than the noise note below assumes. "
            "Re-run on a quiet machine.",
        ]
    out += [
        "",
        "### Targets",
        "",
        "Computed from the numbers below. Timing noise on a shared 2-core machine is a few percent "
        f"(about {100 * NOISE:.0f}%), so a ratio within that of its bound is not a clear miss.",
        "",
    ]
    out += table(
        ["target", "measured", "met"],
        [list(r) for r in evaluate_targets(p1, mem, p2, p2_mem)],
    )
    out += [
        "",
        "### Method",
        "",
        f"* Self-attention, d_model {D_MODEL}, {HEADS} heads of {HEAD_DIM}, "
        f"input `(B, T, {D_MODEL})`. All implementations share one set of weights, copied from "
        "one `torch.nn.MultiheadAttention` (qkv via `MultiHeadAttention.from_torch`, the "
        "others from its `in_proj`/`out_proj`):",
        "  * **qkv MHA**: `qkv.attention.MultiHeadAttention`, keep-mask from `padding_mask` or "
        "`is_causal=True`;",
        "  * **torch MHA**: `torch.nn.MultiheadAttention(batch_first=True)`, `need_weights=False`, "
        "`key_padding_mask`, or `attn_mask` + `is_causal=True` for causal;",
        "  * **naive**: four `F.linear` projections, `q @ k^T / sqrt(d)`, "
        "`masked_fill(~keep, -1e10)`, softmax, `@ v`, output projection;",
        "  * **floor (SDPA)**: the same four `F.linear` projections around a bare "
        "`F.scaled_dot_product_attention` (`is_causal=True`, or the boolean keep-mask).",
        "* Masks: none; causal; key padding with the last quarter of every sequence padded "
        "(`lengths = [T*3//4]*B`).",
        "* fwd runs under `torch.no_grad()` in eval mode; fwd+bwd is `out.sum().backward()` with "
        "gradients for the input and all parameters (dropout is 0).",
        "* Times are medians, in milliseconds per call, of `time.perf_counter` samples taken "
        "with the implementations interleaved (rotating round-robin order). Each implementation "
        "first gets one warm-up call; a warm-up call over "
        f"{KEEP_FIRST_S:g} s counts as a sample (shorter lengths warmed the kernels already), a "
        "shorter one is followed by a calibration call (itself a sample if it took over "
        f"{KEEP_FIRST_S:g} s). A sample averages enough back-to-back "
        f"calls to last {1e3 * MIN_SAMPLE_S:.0f} ms; samples per implementation: "
        f"`min({cfg.reps}, max(m, {cfg.budget:g} s / sample))` with m = 3 for qkv MHA, torch "
        "MHA and the floor (compared at the few-percent level) and m = 1 for the rest (naive, "
        "Part 1b, Part 2). The `reps` column is qkv's samples x calls per sample.",
        f"* B > 1 runs only where B·T ≤ {cfg.max_tokens} tokens (`--max-tokens`). "
        f"Naive configurations whose estimated peak exceeds {cfg.naive_limit_gib:g} GiB are "
        "skipped (memory).",
        "* Peak memory, each in a fresh process (`--measure-memory`): build module and inputs, "
        "reset the peak with `/proc/self/clear_refs`, record the peak resident set, run once "
        "(no warm-up: an earlier call of another size moves glibc's dynamic mmap threshold and "
        "so changes how much freed memory stays resident), record again; the difference is the "
        "peak resident memory above the inputs, in MiB (it includes outputs, gradients and "
        "one-time library initialisation, a few MiB). The peak read is `VmHWM` from "
        "`/proc/self/status`, the process's own high-water mark: a spawned child's "
        "`ru_maxrss` starts at its parent's peak (Linux carries the pre-`exec` image's "
        "high-water mark over), which would hide every peak below the parent's size. Where "
        "/proc is unavailable it falls back to `ru_maxrss`.",
        "* Ratios: qkv/floor and qkv/torch (lower is better for qkv), naive/qkv (speed-up of qkv "
        "over naive). Ratios that miss their target (1.05, 1.00, and 3 fwd / 2 fwd+bwd at "
        "T ≥ 2048) are in bold.",
        "* Sanity check (max |output - floor| at B=2, T=64, all masks): "
        + "; ".join(
            f"{dtype}: " + ", ".join(f"{IMPL_NAMES.get(k, k)} {v:.1e}" for k, v in diffs.items())
            for dtype, diffs in equiv.items()
        )
        + ".",
        "",
    ]
    # Part 1 timings.
    out += ["### Part 1: multi-head self-attention, time (ms)", ""]
    groups = sorted({(k[0], k[1]) for k in p1}, key=lambda g: (cfg.dtypes.index(g[0]), g[1]))
    for dtype, batch in groups:
        out += [f"#### {dtype}, B={batch}", ""]
        rows = []
        for key, row in p1.items():
            if key[:2] != (dtype, batch):
                continue
            _, _, length, mask, mode = key
            ms = {impl: ms_of(row.get(impl)) for impl in IMPLS}
            r_floor = ms["qkv"] / ms["floor"]
            r_torch = ms["qkv"] / ms["torch"]
            speed = ms["naive"] / ms["qkv"] if ms["naive"] else None
            naive_bound = 3.0 if mode == "fwd" else 2.0
            rows.append(
                [
                    str(length),
                    mask,
                    MODE_NAMES[mode],
                    *(fms(ms[i]) if ms[i] is not None else str(row.get(i)) for i in IMPLS),
                    fratio(r_floor, r_floor > 1.05),
                    fratio(r_torch, r_torch > 1.0),
                    fratio(speed, speed is not None and length >= 2048 and speed < naive_bound),
                    f"{row['qkv']['reps']}x{row['qkv']['calls']}",
                ]
            )
        out += table(
            [
                "T",
                "mask",
                "mode",
                *(IMPL_NAMES[i] for i in IMPLS),
                "qkv/floor",
                "qkv/torch",
                "naive/qkv",
                "reps",
            ],
            rows,
        )
        out += [""]
    # Part 1 memory.
    out += ["### Part 1: peak memory above the inputs (MiB), B=1, float32, fresh process", ""]
    if not mem:
        out += ["Not measured (`--no-memory`).", ""]
    else:
        cells: dict[tuple, dict[str, str]] = {}
        for job, got in mem.items():
            value = got.get("peak_above_inputs_mib")
            cells.setdefault((job.length, job.mask, job.mode), {})[job.impl] = (
                f"{value:.1f}" if value is not None else got["status"]
            )
        rows = []
        for (length, mask, mode), got in sorted(
            cells.items(), key=lambda kv: (kv[0][0], MASKS.index(kv[0][1]), MODES.index(kv[0][2]))
        ):
            rows.append(
                [
                    str(length),
                    mask,
                    MODE_NAMES[mode],
                    *(got.get(i, "skipped (memory)") for i in IMPLS),
                ]
            )
        out += table(["T", "mask", "mode", *(IMPL_NAMES[i] for i in IMPLS)], rows)
        out += [""]
    # Part 1b.
    out += [
        "### Part 1b: attention weights requested (B=1, float32, no mask)",
        "",
        "qkv `need_weights=True` takes the chunked path (query blocks, float32 softmax) and "
        "returns the `(B, H, T, T)` weights; naive returns its softmax. Peak memory includes the "
        "weights output itself (its size is in the second column).",
        "",
    ]
    rows = []
    for (length, mode), row in p1b.items():
        weights_mib = HEADS * length * length * 4 / MIB
        a, b = ms_of(row["qkv-weights"]), ms_of(row["naive-weights"])
        memo = {j.impl: v for j, v in p1b_mem.items() if j.length == length and j.mode == mode}

        def mib(impl: str, memo=memo) -> str:
            got = memo.get(impl)
            if got is None:
                return "-"
            value = got.get("peak_above_inputs_mib")
            return f"{value:.1f}" if value is not None else got["status"]

        rows.append(
            [
                str(length),
                f"{weights_mib:.0f}",
                MODE_NAMES[mode],
                fms(a),
                fms(b),
                fratio(b / a),
                mib("qkv-weights"),
                mib("naive-weights"),
            ]
        )
    header = ["T", "weights MiB", "mode", "qkv ms", "naive ms", "naive/qkv"]
    header += ["qkv peak MiB", "naive peak MiB"]
    out += table(header, rows) if rows else ["No length in 1024-4096 was run (`--lengths`)."]
    out += [""]
    # Part 2.
    s = cfg.additive
    out += [
        f"### Part 2: additive (Bahdanau) score, B={s['batch']}, Tq=Tk={s['length']}, "
        f"query/key dim {s['dim']}, hidden {s['hidden']}, float32",
        "",
        "qkv: `Additive(...)(q, k)`; naive: `v(tanh(W q[:, :, None] + U k[:, None])).squeeze(-1)` "
        f"with the same weights (max |difference| {p2['max_abs_diff']:.1e} at batch 2). Times "
        "are taken in a fresh process (its warm-up call not counted), like the peaks: after "
        "Part 1, glibc's dynamic mmap threshold sits at its 32 MiB maximum and the score's "
        "16 MiB per-chunk temporaries would come from the heap instead, which changes both time "
        "and resident memory.",
        "",
    ]
    rows = []
    for mode in MODES:
        a, b = ms_of(p2[mode]["additive-qkv"]), ms_of(p2[mode]["additive-naive"])
        got = {j.impl: v.get("peak_above_inputs_mib") for j, v in p2_mem.items() if j.mode == mode}
        qm, nm = got.get("additive-qkv"), got.get("additive-naive")
        rows.append(
            [
                MODE_NAMES[mode],
                fms(a),
                fms(b),
                fratio(a / b, a / b > 1.2),
                f"{qm:.1f}" if qm is not None else "-",
                f"{nm:.1f}" if nm is not None else "-",
                fratio(nm / qm, nm / qm < 8) if qm and nm else "-",
            ]
        )
    out += table(
        [
            "mode",
            "qkv ms",
            "naive ms",
            "time qkv/naive",
            "qkv peak MiB",
            "naive peak MiB",
            "memory naive/qkv",
        ],
        rows,
    )
    out += [""]
    # Part 3.
    out += [
        "### Part 3: bfloat16",
        "",
        "qkv's no-weights path calls SDPA, so qkv-bf16 / SDPA-bf16 measures qkv's overhead on "
        "top of SDPA's own bfloat16 kernel. The last column is qkv's bfloat16 speed-up over its "
        "float32.",
        "",
    ]
    rows = []
    for key, row in p1.items():
        dtype, batch, length, mask, mode = key
        if dtype != "bfloat16" or length < 1024:
            continue
        a, b = ms_of(row["qkv"]), ms_of(row["floor"])
        f32 = p1.get(("float32", batch, length, mask, mode), {}).get("qkv")
        rows.append(
            [
                str(batch),
                str(length),
                mask,
                MODE_NAMES[mode],
                fms(a),
                fms(b),
                fratio(a / b),
                fms(ms_of(f32)) if f32 else "-",
                fratio(ms_of(f32) / a) if f32 else "-",
            ]
        )
    if rows:
        out += table(
            [
                "B",
                "T",
                "mask",
                "mode",
                "qkv bf16 ms",
                "SDPA floor bf16 ms",
                "qkv/SDPA",
                "qkv fp32 ms",
                "fp32/bf16",
            ],
            rows,
        )
    else:
        out += ["No bfloat16 configuration with T ≥ 1024 was run."]
    out += [
        "",
        f"Accuracy at T={cfg.accuracy_length}, B=1, {HEADS} heads: max |error| of the output "
        "against a float64 reference (the same bf16-representable weights and input, computed "
        "in float64).",
        "",
    ]
    rows = []
    labels = {
        "qkv": "qkv MHA (SDPA path)",
        "qkv-weights": "qkv MHA, need_weights (chunked, float32 softmax)",
        "floor": "SDPA (floor)",
        "torch": "torch MHA",
        "naive": "naive",
    }
    for mask, row in acc.items():
        for impl, label in labels.items():
            rows.append(
                [
                    mask,
                    label,
                    f"{row[(impl, 'bfloat16')]:.2e}",
                    f"{row[(impl, 'float32')]:.2e}",
                    f"{row['ref_max_abs']:.2f}",
                ]
            )
    out += table(["mask", "implementation", "bf16 error", "fp32 error", "max abs reference"], rows)
    out += ["", END]
    return "\n".join(out) + "\n"


def write_report(path: Path, section: str) -> None:
    splice(path, section, BEGIN, END)


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
        help="markdown report (default docs/benchmarks.md; with --quick, stdout only unless given)",
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
        else (None if cfg.quick else ROOT / "docs" / "benchmarks.md")
    )
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.perf_counter()
    share = CpuShare()
    facts = machine_facts()
    facts["date"] = started
    facts["load average at start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
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
        every = run_mem_jobs(jobs1 + jobs1b + jobs2, cfg.jobs)
        mem = {j: every[j] for j in jobs1}
        p1b_mem = {j: every[j] for j in jobs1b}
        p2_mem = {j: every[j] for j in jobs2}
    wall = time.perf_counter() - t0
    facts["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    others = share.others()
    if others is not None:
        facts["CPU taken by other processes during the run"] = f"{100 * others:.1f}%"
    report = render(
        cfg, facts, started, wall, equiv, p1, mem, p1b, p1b_mem, p2, p2_mem, acc, others
    )
    if out_path is None:
        sys.stdout.write(report)
    else:
        write_report(out_path, report)
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

"""What this machine can do that changes how qkv should run it: bfloat16 kernels, and how much
memory there is (a model or data set that cannot fit is refused before anything is allocated).

oneDNN has native bfloat16 kernels only on CPUs with AVX-512 BF16 or AMX. Elsewhere (an AVX2
CPU) a bfloat16 matrix product falls back to slow reference code (a 2048 x 2048 x 2048 product
took 59 s against 0.11 s in float32 on an AVX2 AMD EPYC here) and the bfloat16 LSTM does not
exist at all. :mod:`qkv.layers.recurrent` runs LSTMs in float32 there; training and generation
in bfloat16 warn.
"""

from __future__ import annotations

import functools
import logging
import os

import torch

logger = logging.getLogger(__name__)

# What :func:`memory_bytes` assumes where the operating system does not say: 1 TiB.
UNKNOWN_MEMORY_BYTES = 2**40


@functools.cache
def memory_bytes() -> int:
    """This machine's physical memory in bytes (``UNKNOWN_MEMORY_BYTES`` where the operating
    system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name
        return UNKNOWN_MEMORY_BYTES


def describe_bytes(count: float) -> str:
    """``count`` bytes for a message: ``"125.3 GiB"``, ``"4.0e+15 TiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB" if count < 1e6 else f"{count:.1e} TiB"


@functools.cache
def cpu_has_bfloat16() -> bool:
    """Whether oneDNN has native bfloat16 kernels on this CPU (AVX-512 BF16 or AMX)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@functools.cache
def cpu_has_amx() -> bool:
    """Whether this CPU has AMX tiles (Intel's bfloat16 matrix units), as Linux reports them
    (``amx_bf16`` among the CPU flags); ``False`` where it does not say."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return any(line.startswith("flags") and "amx_bf16" in line.split() for line in handle)
    except OSError:
        return False


# Below this many rows per product, bfloat16 decoding on a CPU with AVX-512 BF16 but no AMX was
# no faster than float32 (GPT-2 small at batch 1 on a Zen 5 EPYC: 46.9 against 31.0 ms per token
# on one thread, 29.2 against 29.9 on two); at batch 8 it was 2.4x faster.
FEW_ROWS = 8


def warn_if_slow_bfloat16_decoding(device: torch.device | str, rows: int) -> bool:
    """Log a warning when bfloat16 weights will decode ``rows`` rows per step no faster than
    float32 would on this CPU: one without bfloat16 kernels at all, or, for fewer than
    :data:`FEW_ROWS` rows, one with AVX-512 BF16 but no AMX (its bfloat16 matrix-vector
    products widen every weight to float32 as they read it). Returns whether it warned."""
    if warn_if_slow_bfloat16(device, "bfloat16 weights"):
        return True
    if torch.device(device).type != "cpu" or rows >= FEW_ROWS or cpu_has_amx():
        return False
    logger.warning(
        "bfloat16 weights: on this CPU (AVX-512 BF16 without AMX) decoding %d row(s) at a time "
        "is no faster in bfloat16 than in float32 (1.5x slower on one thread on a Zen 5 EPYC); "
        "int8 is the fastest precision here",
        rows,
    )
    return True


def warn_if_slow_bfloat16(device: torch.device | str, what: str) -> bool:
    """Log a warning when ``what`` is to run in bfloat16 on a CPU without bfloat16 kernels;
    returns whether it warned."""
    if torch.device(device).type != "cpu" or cpu_has_bfloat16():
        return False
    logger.warning(
        "%s: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), so bfloat16 matrix "
        "products fall back to slow code, often many times slower than float32; use float32 here",
        what,
    )
    return True

"""What this machine's CPU can do that changes how qkv should run it: bfloat16.

oneDNN has native bfloat16 kernels only on CPUs with AVX-512 BF16 or AMX. Elsewhere (an AVX2
CPU) a bfloat16 matrix product falls back to slow reference code (a 2048 x 2048 x 2048 product
took 59 s against 0.11 s in float32 on an AVX2 AMD EPYC here) and the bfloat16 LSTM does not
exist at all. :mod:`qkv.layers.recurrent` runs LSTMs in float32 there; training and generation
in bfloat16 warn.
"""

from __future__ import annotations

import functools
import logging

import torch

logger = logging.getLogger(__name__)


@functools.cache
def cpu_has_bfloat16() -> bool:
    """Whether oneDNN has native bfloat16 kernels on this CPU (AVX-512 BF16 or AMX)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


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

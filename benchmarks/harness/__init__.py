"""What every benchmark shares, so each script holds only what it measures.

* :mod:`harness.timing`: seconds per call (round-robin medians, or the best of a few rounds);
* :mod:`harness.memory`: the peak resident memory of one call, each in a fresh process;
* :mod:`harness.machine`: where, when and how a run happened (CPU, cores, torch, the command);
* :mod:`harness.report`: progress lines, markdown tables, and writing one benchmark's section of
  its page under ``docs/results/`` between its markers, leaving the other sections alone.

The benchmarks run as scripts (``python benchmarks/NAME.py``), so this folder's parent is on
``sys.path`` and the package imports as ``harness``. Importing it puts the checkout's ``src/``
first on ``sys.path``, so a benchmark runs from a checkout without installing qkv.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
SRC = ROOT / "src"

sys.path.insert(0, str(SRC))

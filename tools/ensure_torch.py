"""Install PyTorch only when no usable one is importable.

Any `pip install torch` without a pinned local build would pull several GB of CUDA packages, so the
set-up keeps an importable torch >= 2.4 as it is and otherwise asks for exactly torch==2.13.0 (a CPU
build served from a local wheel on the project's machines).
"""

from __future__ import annotations

import subprocess
import sys

MINIMUM = (2, 4)
PINNED = "torch==2.13.0"


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def main() -> int:
    try:
        import torch
    except ImportError:
        found = None
    else:
        found = torch.__version__
        if _version_tuple(found) >= MINIMUM:
            print(f"ensure_torch: keeping torch {found}")
            return 0
    print(f"ensure_torch: torch {found or 'missing'}; installing {PINNED}")
    return subprocess.call([sys.executable, "-m", "pip", "install", "-q", PINNED])


if __name__ == "__main__":
    sys.exit(main())

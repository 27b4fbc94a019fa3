"""How many of qkv's own modules a command has imported when training takes its first optimiser
step, and which: ``python tools/count_imports.py train configs/demo.yaml --set out_dir=/tmp/x``.

The first ``torch.optim.Optimizer.step`` call stops the command, so the count covers parsing the
configuration, loading the data, building the model and the first forward and backward pass.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


class FirstStep(Exception):
    pass


def main(argv: list[str]) -> int:
    import torch

    def stop(*args, **kwargs):
        raise FirstStep

    torch.optim.Optimizer.step = stop  # type: ignore[method-assign]  # stop at the first step
    for optimizer in (torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD):
        optimizer.step = stop  # type: ignore[method-assign]
    from qkv.cli.main import main as qkv

    with contextlib.suppress(FirstStep):
        qkv(argv)
    ours = sorted(name for name in sys.modules if name == "qkv" or name.startswith("qkv."))
    source = Path(sys.modules["qkv"].__file__).parent
    total = sum(1 for _ in source.rglob("*.py"))
    print(f"{len(ours)} qkv modules imported before the first step (of {total} files)")
    for name in ours:
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

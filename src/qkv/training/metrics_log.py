"""The run's metrics: a CSV in the run directory, mirrored to TensorBoard when it is installed.

Rows are kept in memory and the CSV is rewritten whole after each row (atomically; columns grow
as keys appear), so a killed run never leaves half a line. A resumed run continues the same
file, dropping the rows written after its checkpoint step; TensorBoard drops them too
(``purge_step``), so neither view shows the lost steps twice.
"""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path
from typing import Any

from qkv.io import atomic_write

TENSORBOARD_DIR = "tensorboard"


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def check_tensorboard(setting: bool | None) -> None:
    """``train.tensorboard: true`` needs the package; None and False need nothing."""
    if setting and not tensorboard_available():
        raise ValueError(
            "train.tensorboard is true, but the tensorboard package is not installed "
            "(pip install tensorboard, or leave train.tensorboard unset to use it when present)"
        )


class MetricsLog:
    """``path``: the CSV (None: keep rows in memory only). ``keep_until``: continue a resumed
    run's file up to this step. ``tensorboard``: None (when installed), True (an error when it
    is not), False (never); event files go beside the CSV, in ``tensorboard/``."""

    def __init__(
        self, path: Path | None, keep_until: int | None = None, tensorboard: bool | None = False
    ) -> None:
        check_tensorboard(tensorboard)
        self.path, self.rows, self.board = path, [], None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if keep_until is not None and path.is_file():
            with open(path, newline="", encoding="utf-8") as handle:
                rows = [
                    {k: _number(v) for k, v in r.items() if v != ""} for r in csv.DictReader(handle)
                ]
            self.rows = [r for r in rows if int(r.get("step", 0)) <= keep_until]
        else:
            path.unlink(missing_ok=True)
        if tensorboard is not False and tensorboard_available():
            from torch.utils.tensorboard import SummaryWriter

            self.board = SummaryWriter(
                str(path.parent / TENSORBOARD_DIR),
                purge_step=None if keep_until is None else keep_until + 1,
            )

    def write(self, row: dict[str, Any]) -> None:
        row = {
            k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v)
            for k, v in row.items()
        }
        self.rows.append(row)
        if self.path is None:
            return
        columns: list[str] = []
        for r in self.rows:
            columns += [k for k in r if k not in columns]

        def write(handle: Any) -> None:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(self.rows)

        atomic_write(self.path, write, mode="w")
        if self.board is not None:
            for key, value in row.items():
                if key not in ("step", "epoch") and isinstance(value, int | float):
                    self.board.add_scalar(key, value, global_step=int(row["step"]))
            self.board.flush()

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
            self.board = None


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text

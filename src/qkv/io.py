"""Files written whole or not at all.

Every file qkv writes (weights, configs, plots, reports) goes to a temporary name in the same
directory, is flushed with ``fsync`` and renamed over the target, so a crash or a kill mid-write
never leaves a torn file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write(path: str | Path, write: Any, *, mode: str = "wb") -> None:
    """Write ``path`` through ``write(file_object)`` on a temporary file, fsync, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write(path, lambda f: json.dump(obj, f, indent=2, sort_keys=True), mode="w")


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

"""Files written whole or not at all.

Every file qkv writes (weights, configs, plots, reports) goes to a temporary name in the same
directory (``.NAME.XXXXXXXX.tmp``), is flushed with ``fsync`` and renamed over the target, so a
crash or a kill mid-write never leaves a torn file behind. A process killed by SIGKILL cannot
remove its temporary file; :func:`remove_stale_temporaries` does, when the run is resumed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# ".model.safetensors.k2j4_x9a.tmp": the names tempfile.mkstemp/mkdtemp give with
# prefix=f".{name}." and suffix=".tmp" (8 random characters from [a-z0-9_]).
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; when the block ends without an error the
    file is flushed to disk and renamed over ``path``, otherwise it is removed. An ``OSError``
    (a full disk, a read-only directory) names ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as error:
        raise _naming(error, path) from error
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise _naming(error, path) from error
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write(path: str | Path, write: Any, *, mode: str = "wb") -> None:
    """Write ``path`` through ``write(file_object)`` on a temporary file, fsync, then rename."""
    with atomic_file(path) as tmp, open(tmp, mode) as handle:
        write(handle)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write(path, lambda f: json.dump(obj, f, indent=2, sort_keys=True), mode="w")


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Remove the temporary files and directories that killed writes left anywhere under
    ``directory`` (call it only while nothing writes there); returns what was removed."""
    removed = []
    for parent, dirs, files in os.walk(directory):
        for name in [*files, *dirs]:
            if TEMPORARY.fullmatch(name):
                path = Path(parent) / name
                if name in dirs:
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path)
        dirs[:] = [d for d in dirs if not TEMPORARY.fullmatch(d)]
    return removed


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


def _naming(error: OSError, path: Path) -> OSError:
    """The same error (its errno, hence its subclass), with a message that names ``path``."""
    reason = error.strerror or str(error)
    if error.errno is None:
        return OSError(f"cannot write {path}: {reason}")
    return OSError(error.errno, f"cannot write {path}: {reason}")

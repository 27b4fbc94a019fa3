"""Files written whole or not at all, where the user asked, with the user's permissions.

Every file qkv writes (weights, configs, plots, reports) goes to a temporary name in the same
directory (``.NAME.XXXXXXXX.tmp``), is flushed with ``fsync`` and renamed over the target, so a
crash or a kill mid-write never leaves a torn file behind. A process killed by SIGKILL cannot
remove its temporary file; :func:`remove_stale_temporaries` does, when the run is resumed.

A rename replaces whatever is at the target, so the target is checked first
(:func:`check_output_file`): a regular file or nothing is replaced; a symbolic link is followed
and its target replaced, the link kept; ``-``, ``/dev/stdout`` and ``/dev/stderr`` are written
through (the whole file at once, once it is complete); anything else (a directory, a FIFO, a
device, a socket, a dangling link) is refused. A new file gets the mode the process's umask gives
(``0o666 & ~umask``; a directory ``0o777 & ~umask``), a replaced file keeps its mode.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# ".model.safetensors.k2j4_x9a.tmp": the names tempfile.mkstemp/mkdtemp give with
# prefix=f".{name}." and suffix=".tmp" (8 random characters from [a-z0-9_]).
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


# Output names written through to the process's own streams instead of being replaced.
STREAMS = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}


def check_output_file(path: str | Path) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself when it is a regular file or does
    not exist, the target of a symbolic link to one; ``path`` unchanged for the streams written
    through (``-``, ``/dev/stdout``, ``/dev/stderr``). Anything else is refused with a
    ``ValueError`` naming what is there, before any work is done."""
    if str(path) in STREAMS:
        return Path(path)
    path = Path(path)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as error:
        raise _naming(error, path) from error
    target = path
    if stat.S_ISLNK(status.st_mode):
        target = Path(os.path.realpath(path))
        try:
            status = os.stat(target)
        except FileNotFoundError:
            raise ValueError(
                f"cannot write {path}: it is a symbolic link to {target}, which does not exist; "
                "name a regular file"
            ) from None
    if not stat.S_ISREG(status.st_mode):
        where = path if target == path else f"{path} (a link to {target})"
        raise ValueError(
            f"cannot write {where}: it is {_kind(status.st_mode)}, not a regular file; name a "
            "regular file (or - for standard output)"
        )
    return target


def new_file_mode() -> int:
    """The mode a new file gets under the process's umask: ``0o666 & ~umask``."""
    return 0o666 & ~_umask()


def new_directory_mode() -> int:
    """The mode a new directory gets under the process's umask: ``0o777 & ~umask``."""
    return 0o777 & ~_umask()


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; when the block ends without an error the
    file is flushed to disk and renamed over ``path``, otherwise it is removed. ``path`` is
    checked first (:func:`check_output_file`): a symbolic link's target is replaced, a stream
    (``-``, ``/dev/stdout``) gets the finished file written through, anything else that is not a
    regular file is refused. An ``OSError`` (a full disk, a read-only directory) names ``path``."""
    target = check_output_file(path)
    if str(target) in STREAMS:
        with _written_through(STREAMS[str(target)]) as tmp:
            yield tmp
        return
    path = target
    mode = _mode_of(path, default=new_file_mode())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as error:
        raise _naming(error, path) from error
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp makes 0o600 (and a writer may have made the file anew, as safetensors does):
        # the file gets what an open() would have given it, once it is written
        os.chmod(tmp, mode)
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


def make_temporary_directory(parent: Path, name: str) -> Path:
    """A new ``.NAME.XXXXXXXX.tmp`` directory in ``parent``, with the mode the umask gives
    (``mkdtemp`` alone makes it 0o700), to be renamed into place once complete."""
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.", suffix=".tmp"))
    os.chmod(tmp, new_directory_mode())
    return tmp


@contextlib.contextmanager
def _written_through(fd: int) -> Iterator[Path]:
    """A temporary file whose whole content goes to ``fd`` (1: standard output) once the block
    ends without an error; nothing is written otherwise."""
    handle, name = tempfile.mkstemp(prefix=".qkv-output.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        data = tmp.read_bytes()
    finally:
        tmp.unlink(missing_ok=True)
    stream = sys.stdout if fd == 1 else sys.stderr
    stream.flush()  # text already printed comes first
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: the only portable way, set and put back at once
    os.umask(mask)
    return mask


def _mode_of(path: Path, *, default: int) -> int:
    """The permission bits of the regular file at ``path``, or ``default`` where there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return default


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


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

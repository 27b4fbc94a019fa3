"""What a directory held when qkv wrote it: the size and SHA-256 of each file a loader reads, kept
in ``manifest.json`` so that a file swapped, truncated, bit-flipped or deleted afterwards is
refused by name instead of loading into wrong answers with no error.

    {"format": 1, "files": {"model.safetensors": {"size": 14647976, "sha256": "9f2c..."}, ...}}

The manifest is written last, atomically (:func:`qkv.io.atomic_write_json`), after the files it
lists; a writer that replaces one file (the best weights during training) writes the manifest
again, keeping the entries of the files it did not write (``unchanged``), so a file changed on
disk in between is never taken as the new truth. Verification reads every listed file once
(the demo Transformer's 14.6 MB of weights: 19-23 ms on an idle core of a 2-core Xeon, about
45 ms with both cores busy); files added to the directory later (plots, results, explorer pages)
are not listed and not checked.

A directory without ``manifest.json`` was written before qkv kept one (or by hand): it is
*unverified* and loads as it always did; :func:`verify_manifest` returns ``False`` for it so the
caller may say so. A manifest that is not one (bad JSON, wrong format) is refused: qkv wrote it
and it has changed, so nothing it vouches for can be trusted.

Other records (a CTranslate2 export's ``export.json``) keep the same entries under their own
``"files"`` key: :func:`record_files`, :func:`entries_to_json`, :func:`entries_from_json` and
:func:`check_files` serve them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.io import atomic_write_json

MANIFEST_FILE = "manifest.json"
FORMAT = 1
CHUNK = 1 << 20  # bytes hashed at a time: large weights are never read whole into memory


class ManifestError(ValueError):
    """A file of a saved directory is missing or differs from what its manifest records."""


@dataclass(frozen=True)
class Entry:
    """What a manifest records of one file. ``previous``: while a writer replaces the file
    (:func:`write_manifest` with ``replacing``), the file it replaces, so a process killed
    between the rename and the next manifest leaves a directory that still verifies."""

    size: int
    sha256: str
    previous: Entry | None = None

    def matches(self, other: Entry) -> bool:
        return (self.size, self.sha256) == (other.size, other.sha256)


def file_entry(path: str | Path) -> Entry:
    """The size and SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            size += len(block)
    return Entry(size, digest.hexdigest())


def record_files(
    directory: str | Path, names: Iterable[str], *, kept: Mapping[str, Entry] | None = None
) -> dict[str, Entry]:
    """The entry of each of ``names`` (paths relative to ``directory``, ``/``-separated) that
    exists there: taken from ``kept`` where it has one, else hashed now."""
    directory = Path(directory)
    kept = kept or {}
    return {
        name: kept.get(name) or file_entry(directory / name)
        for name in sorted(names)
        if (directory / name).is_file()
    }


def entries_to_json(entries: Mapping[str, Entry]) -> dict[str, dict[str, Any]]:
    return {name: _entry_json(entry) for name, entry in sorted(entries.items())}


def _entry_json(entry: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {"size": entry.size, "sha256": entry.sha256}
    if entry.previous is not None:
        out["previous"] = _entry_json(entry.previous)
    return out


def entries_from_json(raw: Any, where: Path) -> dict[str, Entry]:
    """The entries of a ``"files"`` object read from ``where``; a damaged one is a
    :class:`ManifestError` naming it."""
    try:
        if not isinstance(raw, dict):
            raise TypeError(f"files must be an object, got {type(raw).__name__}")
        return {str(name): _entry(value) for name, value in raw.items()}
    except (KeyError, TypeError, ValueError) as error:
        raise _damaged(where, error) from None


def check_files(
    directory: str | Path,
    entries: Mapping[str, Entry],
    *,
    listed_in: str,
    remedy: str,
    only: Collection[str] | None = None,
) -> None:
    """Check each file of ``entries`` (those in ``only``, when given) against its recorded size
    and SHA-256. A missing or changed file is a :class:`ManifestError` naming it, what differs,
    ``listed_in`` (the record) and ``remedy`` (what to do)."""
    directory = Path(directory)
    for name, want in entries.items():
        if only is not None and name not in only:
            continue
        path = directory / name
        if not path.is_file():
            raise ManifestError(f"{path} is missing: {listed_in} lists it; {remedy}")
        size = path.stat().st_size
        if want.previous is not None and _matches_either(path, size, want):
            continue  # a replacement was under way: the file is the old one or the new one
        if size != want.size:  # cheap: a truncated or swapped file is not read through
            raise ManifestError(
                f"{path} has changed since it was saved: {size:,} bytes, {listed_in} recorded "
                f"{want.size:,}; {remedy}"
            )
        got = file_entry(path)
        if got.sha256 != want.sha256:
            raise ManifestError(
                f"{path} has changed since it was saved: its SHA-256 is {got.sha256[:12]}..., "
                f"{listed_in} recorded {want.sha256[:12]}... (same size, other bytes); {remedy}"
            )


def write_manifest(
    directory: str | Path,
    names: Iterable[str],
    *,
    unchanged: Collection[str] = (),
    replacing: Mapping[str, Entry] | None = None,
) -> dict[str, Entry]:
    """Record each of ``names`` that exists in ``directory`` in ``directory/manifest.json``,
    atomically; returns the entries written. A name in ``unchanged`` is a file this save did
    not write: it keeps the entry the existing manifest has for it (hashed now only when that
    manifest has none, or there is no manifest). ``replacing`` maps a file about to be renamed
    into place to its new entry: it is recorded with the entry it replaces as ``previous``, and
    either passes verification until the manifest is written again."""
    directory = Path(directory)
    replacing = replacing or {}
    old = (read_manifest(directory) or {}) if unchanged or replacing else {}
    kept = {name: entry for name, entry in old.items() if name in unchanged}
    entries = record_files(directory, [n for n in names if n not in replacing], kept=kept)
    for name, new in replacing.items():
        before = old.get(name)
        entries[name] = Entry(new.size, new.sha256, None if before is None else _plain(before))
    atomic_write_json(
        directory / MANIFEST_FILE, {"format": FORMAT, "files": entries_to_json(entries)}
    )
    return entries


def read_manifest(directory: str | Path) -> dict[str, Entry] | None:
    """The entries of ``directory/manifest.json``; ``None`` when there is no manifest. One qkv
    cannot read is a :class:`ManifestError` naming it."""
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"not a qkv manifest of format {FORMAT}")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _damaged(path, error) from None
    return entries_from_json(raw.get("files"), path)


def verify_manifest(
    directory: str | Path, *, remedy: str, only: Collection[str] | None = None
) -> bool:
    """Check the files ``directory/manifest.json`` lists (those in ``only``, when given) with
    :func:`check_files`; ``False`` when there is no manifest (an unverified directory), ``True``
    when every file checked matches."""
    entries = read_manifest(directory)
    if entries is None:
        return False
    check_files(directory, entries, listed_in=MANIFEST_FILE, remedy=remedy, only=only)
    return True


def _plain(entry: Entry) -> Entry:
    return Entry(entry.size, entry.sha256)


def _matches_either(path: Path, size: int, want: Entry) -> bool:
    """Whether the file at ``path`` (of ``size`` bytes) is ``want`` or ``want.previous``."""
    candidates = [e for e in (want, want.previous) if e is not None and e.size == size]
    if not candidates:
        return False
    got = file_entry(path)
    return any(e.matches(got) for e in candidates)


def _damaged(where: Path, error: Exception) -> ManifestError:
    return ManifestError(
        f"{where} is damaged ({error}); it cannot vouch for the files beside it: restore it "
        "with the directory's other files, or write the directory again"
    )


def _entry(value: object) -> Entry:
    if not isinstance(value, dict):
        raise TypeError(f"an entry must be an object, got {value!r}")
    size, sha256 = value["size"], value["sha256"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be an int >= 0, got {size!r}")
    if not (isinstance(sha256, str) and len(sha256) == 64):
        raise ValueError(f"sha256 must be 64 hex digits, got {sha256!r}")
    previous = value.get("previous")
    return Entry(size, sha256, None if previous is None else _plain(_entry(previous)))

"""qkv.manifest: each file's size and SHA-256 (against hashlib over the whole bytes), checked
back; a rewrite that keeps the entries of files it did not write never blesses a change."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from qkv.manifest import (
    CHUNK,
    MANIFEST_FILE,
    Entry,
    ManifestError,
    file_entry,
    read_manifest,
    verify_manifest,
    write_manifest,
)

REMEDY = "do the thing"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.json").write_text('["x", "y"]')
    (tmp_path / "w.bin").write_bytes(bytes(range(256)) * (CHUNK // 128 + 3))  # several chunks
    return tmp_path


def test_entries_are_the_size_and_sha256_of_the_whole_file(folder):
    data = (folder / "w.bin").read_bytes()
    assert len(data) > 2 * CHUNK
    assert file_entry(folder / "w.bin") == Entry(len(data), hashlib.sha256(data).hexdigest())
    written = write_manifest(folder, ["w.bin", "a.json", "absent.txt"])
    assert set(written) == {"a.json", "w.bin"}  # a name that is not there is not listed
    saved = json.loads((folder / MANIFEST_FILE).read_text())
    assert saved["format"] == 1
    assert saved["files"]["w.bin"] == {
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    assert read_manifest(folder) == written
    assert verify_manifest(folder, remedy=REMEDY) is True


def test_no_manifest_is_unverified_not_an_error(folder):
    assert read_manifest(folder) is None
    assert verify_manifest(folder, remedy=REMEDY) is False


def test_only_checks_the_files_named(folder):
    write_manifest(folder, ["a.json", "w.bin"])
    (folder / "w.bin").write_bytes(b"other")
    assert verify_manifest(folder, remedy=REMEDY, only=["a.json"])
    with pytest.raises(ManifestError, match=r"w\.bin has changed since it was saved: 5 bytes"):
        verify_manifest(folder, remedy=REMEDY)


def test_a_rewrite_keeps_the_entries_of_files_it_did_not_write(folder):
    write_manifest(folder, ["a.json", "w.bin"])
    (folder / "a.json").write_text('["y", "x"]')  # changed on disk: same size, other bytes
    (folder / "w.bin").write_bytes(b"new weights")  # what this save wrote
    write_manifest(folder, ["a.json", "w.bin"], unchanged=["a.json"])
    with pytest.raises(ManifestError, match=re.escape("a.json has changed")) as caught:
        verify_manifest(folder, remedy=REMEDY)
    assert "SHA-256" in str(caught.value) and str(caught.value).endswith(REMEDY)
    assert verify_manifest(folder, remedy=REMEDY, only=["w.bin"])
    # With no manifest to keep from, an unchanged file is hashed as it is.
    (folder / MANIFEST_FILE).unlink()
    write_manifest(folder, ["a.json", "w.bin"], unchanged=["a.json"])
    assert verify_manifest(folder, remedy=REMEDY)


def test_a_missing_file_is_named(folder):
    write_manifest(folder, ["a.json", "w.bin"])
    (folder / "a.json").unlink()
    with pytest.raises(ManifestError, match=r"a\.json is missing: manifest\.json lists it"):
        verify_manifest(folder, remedy=REMEDY)


@pytest.mark.parametrize(
    "text",
    [
        "{oops",
        "[1]",
        '{"format": 2, "files": {}}',
        '{"format": 1}',
        '{"format": 1, "files": {"a.json": {"size": -1, "sha256": "' + "0" * 64 + '"}}}',
        '{"format": 1, "files": {"a.json": {"size": 3, "sha256": "abc"}}}',
        '{"format": 1, "files": {"a.json": {"size": true, "sha256": "' + "0" * 64 + '"}}}',
    ],
)
def test_a_damaged_manifest_is_refused_naming_it(folder, text):
    (folder / MANIFEST_FILE).write_text(text)
    with pytest.raises(ManifestError, match=re.escape(f"{folder / MANIFEST_FILE} is damaged")):
        verify_manifest(folder, remedy=REMEDY)


def test_a_replacement_under_way_verifies_as_the_old_file_or_the_new_one(folder):
    write_manifest(folder, ["w.bin", "a.json"])
    old = file_entry(folder / "w.bin")
    new_bytes = bytes(reversed(range(256))) * (CHUNK // 128 + 3)  # same size, other bytes
    (folder / "next.bin").write_bytes(new_bytes)
    write_manifest(folder, ["w.bin", "a.json"], unchanged=["a.json"],
                   replacing={"w.bin": file_entry(folder / "next.bin")})  # fmt: skip
    recorded = read_manifest(folder)["w.bin"]
    assert recorded.previous == old and recorded.sha256 == hashlib.sha256(new_bytes).hexdigest()
    assert verify_manifest(folder, remedy=REMEDY)  # killed before the rename: the old file
    (folder / "next.bin").replace(folder / "w.bin")
    assert verify_manifest(folder, remedy=REMEDY)  # killed after it: the new file
    (folder / "w.bin").write_bytes(b"\0" * len(new_bytes))  # neither: refused
    with pytest.raises(ManifestError, match=r"w\.bin has changed since it was saved"):
        verify_manifest(folder, remedy=REMEDY)
    write_manifest(folder, ["w.bin", "a.json"], unchanged=["a.json"])
    assert read_manifest(folder)["w.bin"].previous is None  # the next manifest drops it

"""qkv.io: files written whole, where the user asked, with the user's permissions. Special files
are made in a temporary folder (FIFOs, links); no test points at a real device node."""

from __future__ import annotations

import os
import stat

import pytest

from qkv.io import (
    atomic_file,
    atomic_write,
    atomic_write_json,
    check_output_file,
    make_temporary_directory,
    new_directory_mode,
    new_file_mode,
)


@pytest.fixture
def umask():
    """Set the process's umask for one test, and put the previous one back."""
    before = os.umask(0o022)
    os.umask(before)
    yield lambda mask: os.umask(mask)
    os.umask(before)


def _bytes(content: bytes):
    return lambda handle: handle.write(content)


def test_a_fifo_is_refused_and_left_a_fifo(tmp_path):
    fifo = tmp_path / "out.png"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"out.png: it is a FIFO \(named pipe\), not a regular"):
        atomic_write(fifo, _bytes(b"x"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]  # no temporary left


def test_a_directory_and_a_link_to_a_fifo_are_refused(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="folder: it is a directory, not a regular file"):
        atomic_write(tmp_path / "folder", _bytes(b"x"))
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")
    with pytest.raises(ValueError, match=r"link \(a link to .*pipe\): it is a FIFO"):
        atomic_write(tmp_path / "link", _bytes(b"x"))
    assert (tmp_path / "link").is_symlink() and stat.S_ISFIFO(os.stat(tmp_path / "link").st_mode)


def test_a_dangling_link_is_refused(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "file")
    with pytest.raises(ValueError, match=r"symbolic link to .*nowhere/file, which does not exist"):
        atomic_write(tmp_path / "link", _bytes(b"x"))
    assert (tmp_path / "link").is_symlink() and not (tmp_path / "nowhere").exists()


def test_a_link_to_a_regular_file_replaces_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    atomic_write_json(tmp_path / "link.json", {"a": 1})
    assert (tmp_path / "link.json").is_symlink()
    assert target.read_text() == '{\n  "a": 1\n}'
    assert check_output_file(tmp_path / "link.json") == target


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_standard_output_is_written_through(name, capfdbinary):
    print("printed first")
    atomic_write(name, _bytes(b"\x89PNG whole file"))
    out, err = capfdbinary.readouterr()
    assert out == b"printed first\n\x89PNG whole file" and err == b""


def test_a_failed_write_to_standard_output_writes_nothing(capfd):
    def fail(handle):
        handle.write(b"half")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        atomic_write("-", fail)
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_new_files_and_directories_get_the_umask_s_mode(tmp_path, umask, mask):
    umask(mask)
    assert new_file_mode() == 0o666 & ~mask and new_directory_mode() == 0o777 & ~mask
    atomic_write(tmp_path / "new.bin", _bytes(b"x"))
    assert stat.S_IMODE(os.stat(tmp_path / "new.bin").st_mode) == 0o666 & ~mask
    made = make_temporary_directory(tmp_path, "export")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o777 & ~mask
    assert made.name.startswith(".export.") and made.name.endswith(".tmp")


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "kept.json"
    path.write_text("{}")
    path.chmod(0o640)
    atomic_write_json(path, [1])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640 and path.read_text() == "[\n  1\n]"


def test_a_file_its_writer_made_anew_still_gets_the_umask_s_mode(tmp_path, umask):
    """safetensors' writer replaces the temporary file it is given (a new 0o600 file)."""
    umask(0o022)

    def recreate(tmp):
        tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"x")
        os.close(fd)

    with atomic_file(tmp_path / "weights.bin") as tmp:
        recreate(tmp)
    assert stat.S_IMODE(os.stat(tmp_path / "weights.bin").st_mode) == 0o644


def test_saved_weights_get_the_umask_s_mode(tmp_path, umask):
    import torch

    from qkv.training.checkpoint import save_weights

    umask(0o022)
    save_weights(torch.nn.Linear(2, 2), tmp_path / "model.safetensors")
    assert stat.S_IMODE(os.stat(tmp_path / "model.safetensors").st_mode) == 0o644

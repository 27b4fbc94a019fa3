"""``qkv configs`` lists every packaged run configuration; ``qkv train NAME`` and
``qkv study length`` find them by name from any working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from qkv.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "qkv" / "configs"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own errors
        code = int(exit_.code)
    out, err = capsys.readouterr()
    return code, out, err


def test_lists_every_file_on_disk_with_its_first_comment_line(capsys):
    code, out, err = _run(capsys, "configs")
    assert code == 0 and not err
    files = sorted(CONFIGS.rglob("*.yaml"), key=lambda p: p.relative_to(CONFIGS).as_posix())
    lines = out.splitlines()
    assert len(lines) == len(files)
    for line, path in zip(lines, files, strict=True):
        name, description = line.split(maxsplit=1)
        assert name == path.relative_to(CONFIGS).with_suffix("").as_posix()
        assert description == path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")


def test_paths_shows_the_files(capsys):
    code, out, _ = _run(capsys, "configs", "--paths")
    assert code == 0
    shown = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert Path(shown["demo"]).resolve() == (CONFIGS / "demo.yaml").resolve()


def test_an_unexpected_argument_exits_2(capsys):
    code, _, err = _run(capsys, "configs", "demo")
    assert code == 2 and "unrecognized arguments: demo" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "tiny/revers-transformer"],
         "qkv train: error: no configuration file or packaged configuration named "
         "'tiny/revers-transformer'; the closest: tiny/reverse-transformer"),
        (["train", "configs/demo.yaml"],
         "qkv train: error: no configuration file configs/demo.yaml (the packaged configuration "
         "of that name is `demo`)"),
        (["study", "length", "--configs", "rnn-nothing"],
         "qkv study: error: no configuration file or packaged configuration named 'rnn-nothing'"),
    ],
)  # fmt: skip
def test_unknown_names_exit_2_naming_them(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the checkout: no configs/ here
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not any(tmp_path.iterdir())


def test_the_study_reads_its_configs_from_the_package(tmp_path, monkeypatch):
    from qkv.studies import length

    monkeypatch.chdir(tmp_path)
    read = []

    def stop(path, overrides=None):
        read.append(Path(path))
        raise ValueError("stop")

    monkeypatch.setattr(length, "load_run_config", stop)
    with pytest.raises(ValueError, match="stop"):
        length.run_length_study(minutes=1, out_dir=tmp_path / "out")
    assert [p.resolve() for p in read] == [(CONFIGS / "rnn-none.yaml").resolve()]
    assert [(CONFIGS / f"{n}.yaml").is_file() for n in length.DEFAULT_CONFIGS] == [True] * 3

"""A CTranslate2 export records the size and SHA-256 of every file it wrote in qkv/export.json,
and loading it checks them: another export's model.bin, a truncated one, an edited vocabulary
are refused naming the file (the CLI exits 2 with one line, no traceback), where before they
gave garbage with exit 0 or a traceback. An export and a qkv run directory passed to the other
engine are named for what they are."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import qkv
from qkv.cli.main import main
from qkv.ctranslate2.engine import CTranslate2Translator
from qkv.manifest import ManifestError
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_skeleton import run_training

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
TEXT = "a b c d"


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """Two tiny translation runs of the same shape (other seeds: other weights), each exported
    through the command line."""
    root = tmp_path_factory.mktemp("ct2-checks")
    dirs = {}
    for seed in (1, 2):
        model = root / f"model{seed}"
        run = load_run_config(ROOT / "configs/tiny/reverse-transformer.yaml", [
            f"out_dir={model}", f"train.seed={seed}", "train.max_steps=3", "train.eval_every=3",
            "train.warmup_steps=1", "train.checkpoint_every=null", "train.tensorboard=false",
            "data.options.n_train=300", "data.options.n_valid=10", "data.options.n_test=10",
            "data.valid_bleu_sentences=0",
        ])  # fmt: skip
        run_training(run, progress=False, overwrite=True)
        out = root / f"ct2-{seed}"
        assert (
            main(["export", "--format", "ctranslate2", "--model", str(model), "-o", str(out)]) == 0
        )
        dirs[f"model{seed}"], dirs[f"ct2-{seed}"] = model, out
    return dirs


@pytest.fixture
def export(exports, tmp_path) -> Path:
    """A copy of the first export, to damage."""
    return Path(shutil.copytree(exports["ct2-1"], tmp_path / "ct2"))


def _refused(capsys, argv: list[str]) -> str:
    """The one line the CLI printed on refusing ``argv`` (exit 2, nothing on stdout)."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _translate(directory: Path) -> list[str]:
    return ["translate", "--model", str(directory), "--engine", "ctranslate2", TEXT]


def test_the_export_records_every_file_it_wrote_and_loads(exports, capsys):
    out = exports["ct2-1"]
    record = json.loads((out / "qkv" / "export.json").read_text(encoding="utf-8"))
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert sorted(record["files"]) == [name for name in written if name != "qkv/export.json"]
    entry = record["files"]["model.bin"]
    assert entry["size"] == (out / "model.bin").stat().st_size and len(entry["sha256"]) == 64
    assert main(_translate(out)) == 0, capsys.readouterr().err
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_another_exports_model_bin_is_refused_by_name(exports, export, capsys):
    other = exports["ct2-2"] / "model.bin"
    assert other.stat().st_size == (export / "model.bin").stat().st_size  # only the bytes differ
    shutil.copyfile(other, export / "model.bin")
    err = _refused(capsys, _translate(export))
    assert f"{export / 'model.bin'} has changed since it was saved: its SHA-256 is" in err
    assert "export the model again" in err


def test_a_truncated_model_bin_is_refused_by_name(export, capsys):
    data = (export / "model.bin").read_bytes()
    (export / "model.bin").write_bytes(data[: len(data) // 3])
    err = _refused(capsys, _translate(export))
    assert f"{export / 'model.bin'} has changed since it was saved: {len(data) // 3:,} bytes" in err
    with pytest.raises(ManifestError, match=re.escape("qkv/export.json recorded")):
        CTranslate2Translator.load(export)


@pytest.mark.parametrize("name", ["shared_vocabulary.json", "qkv/source_tokenizer.json"])
def test_a_changed_vocabulary_file_is_refused_by_name(export, capsys, name):
    path = export / name
    text = path.read_text(encoding="utf-8")
    # Two tokens of the vocabulary swapped: the same size, other bytes.
    tokens = json.loads(text) if name.startswith("shared") else None
    if tokens is not None:
        tokens[5], tokens[6] = tokens[6], tokens[5]
        changed = json.dumps(tokens, ensure_ascii=False, indent=4)
    else:
        changed = text.replace('"a"', '"#"', 1)
    assert changed != text
    path.write_text(changed, encoding="utf-8")
    err = _refused(capsys, _translate(export))
    assert f"{path} has changed since it was saved" in err


def test_a_missing_file_is_named(export, capsys):
    (export / "qkv" / "target_tokenizer.json").unlink()
    err = _refused(capsys, _translate(export))
    assert f"{export / 'qkv' / 'target_tokenizer.json'} is missing: qkv/export.json lists it" in err


def test_an_export_without_its_record_of_files_is_refused_saying_to_export_again(export, capsys):
    path = export / "qkv" / "export.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    del record["files"]  # as exports made before the record existed
    path.write_text(json.dumps(record), encoding="utf-8")
    err = _refused(capsys, _translate(export))
    assert "records no size and SHA-256 of the exported files" in err
    assert "export the model again (qkv export --format ctranslate2" in err


def test_each_engine_names_the_other_engines_directory(exports, capsys):
    export, model = exports["ct2-1"], exports["model1"]
    err = _refused(capsys, ["translate", "--model", str(export), TEXT])
    assert (
        f"{export} is a CTranslate2 export, not a qkv run directory: pass --engine ctranslate2"
        in err
    )
    plot = ["plot-attention", "--model", str(export), TEXT, "-o", str(export / "a.png")]
    for argv in (["evaluate", "--model", str(export)], plot):
        assert "is a CTranslate2 export, not a qkv run directory" in _refused(capsys, argv)
    with pytest.raises(ValueError, match="is a CTranslate2 export, not a qkv run directory"):
        qkv.load(export)
    err = _refused(capsys, _translate(model))
    assert f"{model} is a qkv run directory, not a CTranslate2 export: pass --engine qkv" in err

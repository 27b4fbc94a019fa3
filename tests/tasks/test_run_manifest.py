"""A saved run's files are checked against its manifest.json when it is loaded: a vocabulary with
two words swapped, reversed labels, a flipped byte in the weights, a truncated or deleted file
are refused by name (through ``load_runner``, ``qkv.load`` and the CLI, which exits 2 with one
line); an untouched run loads, a resumed one stays loadable, a run without a manifest loads as
runs saved before manifests always did (tests/tasks/test_old_runs.py loads those)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import qkv
from qkv.cli.main import main
from qkv.manifest import MANIFEST_FILE, ManifestError, read_manifest
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_dir import load_model_run_config, load_runner
from qkv.tasks.run_skeleton import TrainingRun, run_training
from tests.tasks.test_every_task import _ner, _reading

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 4
SETTINGS = [f"train.max_steps={STEPS}", f"train.eval_every={STEPS}", "train.warmup_steps=1",
            f"train.checkpoint_every={STEPS}", "train.tensorboard=false"]  # fmt: skip
RUNS = {"reading": _reading, "ner": _ner}  # a word vocabulary; labels and a subword tokenizer


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A real saved tiny run of each task in RUNS (seconds each), with one checkpoint."""
    root = tmp_path_factory.mktemp("manifest-runs")
    dirs = {}
    for name, make in RUNS.items():
        folder = root / name
        folder.mkdir()
        config, overrides = make(folder)
        dirs[name] = folder / "run"
        run = load_run_config(config, [*overrides, *SETTINGS, f"out_dir={dirs[name]}"])
        run_training(run, progress=False, overwrite=True)
    return dirs


@pytest.fixture(params=list(RUNS))
def run(request, trained, tmp_path) -> Path:
    """A copy of one trained run, to damage."""
    return Path(shutil.copytree(trained[request.param], tmp_path / request.param))


def _swap_two_words(path: Path) -> None:
    """Swap two entries of a word vocabulary's list, keeping every byte count (same size)."""
    vocab = json.loads(path.read_text(encoding="utf-8"))
    words = vocab["words"]
    i, j = next((i, j) for i in range(len(words)) for j in range(i + 1, len(words))
                if len(words[i]) == len(words[j]))  # fmt: skip
    words[i], words[j] = words[j], words[i]
    before = path.stat().st_size
    path.write_text(json.dumps(vocab), encoding="utf-8")
    assert path.stat().st_size == before  # the check must read the bytes, not only the size


def _reverse(path: Path) -> None:
    labels = json.loads(path.read_text(encoding="utf-8"))
    assert len(set(labels)) > 1
    path.write_text(json.dumps(labels[::-1], indent=2), encoding="utf-8")


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x01  # a low bit of one weight, far from the header
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_an_untouched_run_lists_what_its_loader_reads_and_loads(run):
    entries = read_manifest(run)
    vocabulary = "vocab.json" if run.name == "reading" else "tokenizer.json"
    expected = {"config.json", "model.safetensors", vocabulary}
    if run.name == "ner":
        expected.add("labels.json")
    assert entries is not None and set(entries) == expected
    spec, _ = load_runner(run)
    assert spec.name == run.name
    assert type(qkv.load(run)).__name__ == type(load_runner(run)[1]).__name__
    # Files added later are not the manifest's business.
    (run / "results.json").write_text("{}", encoding="utf-8")
    (run / "attention.png").write_bytes(b"\x89PNG")
    load_runner(run)


# Each damage: the task, the file, how, and what the message says about it.
DAMAGES = [
    ("reading", "vocab.json", _swap_two_words, "SHA-256"),
    ("ner", "labels.json", _reverse, "changed since it was saved"),
    ("reading", "model.safetensors", _flip_byte, "SHA-256"),
    ("ner", "model.safetensors", _flip_byte, "SHA-256"),
    ("ner", "tokenizer.json", _truncate, "bytes, manifest.json recorded"),
    ("reading", "config.json", _truncate, "bytes, manifest.json recorded"),
    ("ner", "labels.json", Path.unlink, "is missing: manifest.json lists it"),
    ("reading", "vocab.json", Path.unlink, "is missing: manifest.json lists it"),
]


@pytest.mark.parametrize(("task", "name", "damage", "said"), DAMAGES,
                         ids=[f"{t}-{n}-{d.__name__}" for t, n, d, _ in DAMAGES])  # fmt: skip
def test_a_damaged_file_is_refused_by_name(trained, tmp_path, task, name, damage, said):
    run = Path(shutil.copytree(trained[task], tmp_path / task))
    damage(run / name)
    for load in (load_runner, qkv.load):
        with pytest.raises(ManifestError, match=re.escape(name)) as caught:
            load(run)
        message = str(caught.value)
        assert said in message and "restore it" in message and "\n" not in message


def test_the_cli_exits_2_with_one_line_naming_the_file(trained, tmp_path, capsys):
    run = Path(shutil.copytree(trained["ner"], tmp_path / "ner"))
    _reverse(run / "labels.json")
    code = main(["evaluate", "--model", str(run), "--split", "valid", "--limit", "5"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("qkv evaluate: error: ") and err.count("\n") == 1, err
    assert f"{run / 'labels.json'} has changed since it was saved" in err
    assert "Traceback" not in err and not (run / "results.json").exists()


def _resume(run: Path, steps: int, capsys) -> tuple[int, str]:
    code = main(["train", "--resume", str(run), "--set", f"train.max_steps={steps}", "--quiet"])
    return code, capsys.readouterr().err


def test_a_resumed_run_rewrites_its_manifest_and_stays_loadable(run, capsys):
    before = read_manifest(run)
    code, err = _resume(run, 2 * STEPS, capsys)
    assert code == 0, err
    after = read_manifest(run)
    assert after is not None and before is not None and set(after) == set(before)
    assert after["config.json"] != before["config.json"]  # train.max_steps changed: hashed anew
    load_runner(run)
    _flip_byte(run / "model.safetensors")  # the rewritten manifest still guards the run
    with pytest.raises(ManifestError, match=r"model\.safetensors"):
        load_runner(run)


def test_a_resume_refuses_a_damaged_vocabulary_before_writing(trained, tmp_path, capsys):
    run = Path(shutil.copytree(trained["reading"], tmp_path / "reading"))
    _swap_two_words(run / "vocab.json")
    manifest = (run / MANIFEST_FILE).read_bytes()
    code, err = _resume(run, 2 * STEPS, capsys)
    assert code == 2 and "vocab.json has changed since it was saved" in err, err
    assert (run / MANIFEST_FILE).read_bytes() == manifest  # not rewritten over the damage
    config = load_model_run_config(run, out_dir=str(run), verify=())  # nothing checked here
    with pytest.raises(ManifestError, match=r"vocab\.json has changed"):
        TrainingRun(config, resume=True)  # the library's own resume checks it too


def test_a_resume_refuses_a_damaged_checkpoint_by_name(run, capsys):
    (checkpoint,) = (run / "checkpoints").glob("step-*")
    _flip_byte(checkpoint / "optimizer.safetensors")
    code, err = _resume(run, 2 * STEPS, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{checkpoint / 'optimizer.safetensors'} has changed since it was saved" in err
    assert f"remove {checkpoint} to resume from an older checkpoint" in err


def test_a_run_without_a_manifest_loads_unverified(run):
    (run / MANIFEST_FILE).unlink()
    spec, _ = load_runner(run)  # as runs saved before manifests: nothing to check against
    assert spec.name == run.name


def test_a_damaged_manifest_is_refused(run):
    (run / MANIFEST_FILE).write_text('{"format": 1, "files": {"config.json": 3}}')
    with pytest.raises(ManifestError, match=re.escape(f"{MANIFEST_FILE} is damaged")):
        load_runner(run)

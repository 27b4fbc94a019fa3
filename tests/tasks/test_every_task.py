"""Every task in the registry, through every door: train a tiny model with ``qkv.train``, load it
through the registry and ``qkv.load``, score it with ``qkv evaluate``, draw its attention with
``qkv plot-attention``, ask the explorer's API for it, and check that each option its task does
not take exits 2 naming the task. A task added to :mod:`qkv.tasks.registry` without a row in
:data:`TINY` fails :func:`test_every_registered_task_is_exercised`, so no task escapes this."""

from __future__ import annotations

import base64
import importlib.util
import string
from pathlib import Path

import pytest
import yaml

import qkv
from qkv.cli.main import main
from qkv.tasks.registry import TASKS, task
from qkv.tasks.run_dir import load_runner
from qkv.tasks.seen import Seen
from qkv.tasks.spec import EVALUATE_OPTIONS, VIEW_OPTIONS, Report, resolve
from tests.explorer.models import ROOT, _encoder_config, _write, _write_files

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.skipif(
        importlib.util.find_spec("sklearn") is None or importlib.util.find_spec("fastapi") is None,
        reason="the image tasks read scikit-learn's digits; the explorer needs fastapi",
    ),
]
QUICK = ["train.max_steps=3", "train.eval_every=3", "train.warmup_steps=1",
         "train.checkpoint_every=null", "train.tensorboard=false"]  # fmt: skip


def _translation(folder: Path) -> tuple[Path, list[str]]:
    return ROOT / "configs/tiny/reverse-transformer.yaml", [
        "data.options.n_train=300", "data.options.n_valid=10", "data.options.n_test=10",
        "data.valid_bleu_sentences=0",
    ]  # fmt: skip


def _language_model(folder: Path) -> tuple[Path, list[str]]:
    text = folder / "alphabet.txt"
    text.write_text((string.ascii_lowercase + " .\n") * 200, encoding="utf-8")
    config = {
        "task": "language_model",
        "data": {"corpus": "text", "options": {"path": str(text), "valid_fraction": 0.1},
                 "block_size": 32, "valid_tokens": 200},
        "model": {"family": "transformer_lm", "preset": "tiny", "num_layers": 1, "max_len": 64},
        "train": {"batch_tokens": 256, "lr": 0.01},
        "decode": {"max_new_tokens": 5, "temperature": 0.0},
    }  # fmt: skip
    return _write(folder / "lm.yaml", config), []


def _classification(folder: Path) -> tuple[Path, list[str]]:
    _write_files(folder)
    data = {"corpus": "file", "options": {"path": str(folder / "reviews.tsv")}}
    return _encoder_config(folder, "classification", data, "encoder_classifier"), []


def _tagging(folder: Path) -> tuple[Path, list[str]]:
    _write_files(folder)
    data = {"corpus": "file", "options": {"train": str(folder / "tagged.txt")}}
    return _encoder_config(folder, "tagging", data, "sequence_tagger"), []


def _ner(folder: Path) -> tuple[Path, list[str]]:
    sentences = ["Mr Kalo met Ms Rami in Venbel .", "we walked near Tormi today ."] * 60
    tags = ["O B-person O O B-person O B-place O", "O O O B-place O O"] * 60
    blocks = ["\n".join(f"{w}\t{t}" for w, t in zip(s.split(), g.split(), strict=True))
              for s, g in zip(sentences, tags, strict=True)]  # fmt: skip
    (folder / "entities.conll").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    path = folder / "entities.conll"
    options = {"train": str(path), "valid": str(path), "test": str(path)}
    data = {"corpus": "file", "options": options}
    config = _encoder_config(folder, "ner", data, "sequence_tagger")
    return config, ["model.crf=true", "model.casing_dim=4"]


def _reading(folder: Path) -> tuple[Path, list[str]]:
    config = {
        "task": "reading",
        "data": {"corpus": "synthetic", "options": {"n": 100}, "min_count": 1},
        "model": {"family": "cloze_reader", "preset": "tiny", "reader": "as_reader"},
        "train": {"batch_tokens": 1024},
    }
    return _write(folder / "reading.yaml", config), []


def _summarisation(folder: Path) -> tuple[Path, list[str]]:
    return ROOT / "configs/tiny/copy-pointer-rnn.yaml", [
        "data.options.n_train=200", "data.options.n_valid=10", "data.options.n_test=10",
        "model.coverage=true",
    ]  # fmt: skip


def _dialogue(folder: Path) -> tuple[Path, list[str]]:
    turns = ["Good morrow , my lord .", "How fares the king ?", "He sleeps , and we must go .",
             "Then go we hence ."]  # fmt: skip
    lines = [f"{turns[i % 3]} <turn> {turns[(i + 1) % 3]}\t{turns[(i + 2) % 4]}"
             for i in range(120)]  # fmt: skip
    (folder / "dialogue.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {
        "task": "dialogue",
        "data": {"corpus": "tsv", "options": {"path": str(folder / "dialogue.tsv")},
                 "vocab_size": 32, "min_count": 1, "valid_examples": 4},
        "model": {"family": "transformer", "d_model": 16, "num_heads": 2,
                  "num_encoder_layers": 1, "num_decoder_layers": 1, "d_ff": 32},
        "train": {"batch_tokens": 256},
        "decode": {"beam_size": 2, "max_len": 6},
    }  # fmt: skip
    return _write(folder / "dialogue.yaml", config), []


def _vit(folder: Path) -> tuple[Path, list[str]]:
    return ROOT / "configs/vit/digits.yaml", ["train.max_minutes=null", "model.num_layers=1"]


def _captioning(folder: Path) -> tuple[Path, list[str]]:
    return ROOT / "configs/caption/tiny.yaml", [
        "data.valid_strips=8", "data.test_strips=8", "train.max_steps=100",
        "train.eval_every=100",  # enough to say a word: an empty caption has no map to draw
    ]  # fmt: skip


def _digits_png(folder: Path, count: int) -> Path:
    """``count`` of scikit-learn's real 8x8 digits side by side, as a PNG file."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    images = load_digits().images[:count]
    pixels = np.concatenate([(image * (255 / 16)).round().astype("uint8") for image in images], 1)
    path = folder / f"digits{count}.png"
    Image.fromarray(pixels, mode="L").save(path)
    return path


# Each registered task: its tiny configuration, the --limit its evaluation takes (items; tokens
# for a language model), and its input (text, or the number of digits in an image).
TINY = {
    "translation": (_translation, 3, "a b c d"),
    "language_model": (_language_model, 100, "abc"),
    "classification": (_classification, 5, "the film was superb"),
    "tagging": (_tagging, 5, "to walk 7 ."),
    "ner": (_ner, 5, "Mr Kalo is in Venbel ."),
    "reading": (_reading, 5, "the key opens XXXXX .\nMira walked and the key opens Kalo ."),
    "image_classification": (_vit, 5, 1),
    "captioning": (_captioning, 3, 2),
    "summarisation": (_summarisation, 3, "the king of bavotek went to rulamip"),
    "dialogue": (_dialogue, 3, "How fares the king ? <turn> He sleeps ."),
}


def test_every_registered_task_is_exercised():
    assert set(TINY) == set(TASKS), "add a row to TINY for every task in the registry"
    for name in TASKS:
        spec = task(name)
        assert (
            spec.name == name
            and spec.families
            and set(spec.sections)
            == {
                "data",
                "train",
                "decode",
            }
        )
        # Every task refuses something, so the refusal below is tested for each one.
        refused = (set(EVALUATE_OPTIONS) - spec.evaluate_options) | (
            set(VIEW_OPTIONS) - spec.view_options
        )
        assert refused, name


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", list(TASKS))
def test_a_task_through_train_evaluate_plot_and_the_explorer(name, tmp_path, capsys):
    from fastapi.testclient import TestClient

    from qkv.explorer.app import create_app
    from qkv.explorer.session import ExplorerModels

    make, limit, given = TINY[name]
    config, overrides = make(tmp_path)
    out = tmp_path / "run"
    # Trained and loaded through the public face (`qkv train` runs the same run_training; it
    # resumes a run of every task in tests/tasks/test_old_runs.py).
    settings = {}
    for setting in [*QUICK, *overrides]:
        key, value = setting.split("=", 1)
        settings[key.replace(".", "__")] = yaml.safe_load(value)
    assert qkv.train(config, out_dir=str(out), **settings) == out
    assert (out / "model.safetensors").is_file()

    spec, runner = load_runner(out)
    assert spec.name == name
    assert type(qkv.load(out)) is type(runner) is resolve(spec.runner)
    split = spec.splits[-1]
    report = runner.report(split, limit=limit)
    assert isinstance(report, Report) and report.lines and not report.complete
    code, stdout, err = _cli(capsys, "evaluate", "--model", out, "--split", split,
                             "--limit", limit, "--quiet")  # fmt: skip
    assert code == 0, err
    assert stdout == "\n".join(report.lines) + "\n"
    assert not (out / "results.json").exists()  # the first N are not the split's scores

    item = str(_digits_png(tmp_path, given)) if spec.input == "image" else given
    plot = tmp_path / "attention.png"
    code, stdout, err = _cli(capsys, "plot-attention", "--model", out, item, "-o", plot)
    assert code == 0, err
    assert plot.stat().st_size > 1000 and f"wrote {plot}" in stdout

    client = TestClient(create_app(ExplorerModels.load([out])), base_url="http://localhost")
    body = {"model": "run"}
    if spec.input == "image":
        body |= {"image": base64.b64encode(Path(item).read_bytes()).decode(), "image_name": "x"}
    else:
        body["text"] = item
    answer = client.post("/api/run", json=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["kind"] == name and result["views"] and result["output"]["summary"]
    seen = runner.views(runner.read_image(item) if spec.input == "image" else item)
    assert isinstance(seen, Seen) and [v["id"] for v in result["views"]] == [
        v.id for v in seen.views
    ]

    # Each option the task does not take exits 2, naming the task.
    evaluate_flags = {"beam": ["--beam", "2"], "examples": ["--examples", "1"],
                      "batch_size": ["--batch-size", "2"]}  # fmt: skip
    view_flags = {"beam": ["--beam", "2"], "layer": ["--layer", "0"], "pooling": ["--pooling"],
                  "heads": ["--heads"]}  # fmt: skip
    for option in set(EVALUATE_OPTIONS) - spec.evaluate_options:
        code, _, err = _cli(capsys, "evaluate", "--model", out, "--split", split,
                            *evaluate_flags[option])  # fmt: skip
        assert code == 2 and f"not for {spec.plural}" in err and "Traceback" not in err, err
    for option in set(VIEW_OPTIONS) - spec.view_options:
        code, _, err = _cli(capsys, "plot-attention", "--model", out, item, "-o",
                            tmp_path / "no.png", *view_flags[option])  # fmt: skip
        assert code == 2 and f"not for {spec.plural}" in err and "Traceback" not in err, err
        assert not (tmp_path / "no.png").exists()

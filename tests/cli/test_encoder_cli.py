"""``qkv train`` / ``evaluate`` / ``classify`` / ``tag`` / ``plot-attention`` for encoders,
through the real command line, on user files; bad input exits 2 without a traceback."""

from __future__ import annotations

import json
import random
import re

import pytest
import yaml

from tests.commands import qkv, qkv_process


def _write_reviews(path) -> None:
    rng = random.Random(3)
    rows = ["text\tlabel"]
    for _ in range(400):
        label = rng.choice(["pos", "neg"])
        words = rng.choices(["the", "film", "plot", "was", "very", "and", "cast"], k=6)
        words.insert(rng.randrange(7), rng.choice(["superb", "witty"] if label == "pos" else
                                                  ["dull", "tired"]))  # fmt: skip
        rows.append(f"{' '.join(words)}\t{label}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _write_tagged(path) -> None:
    rng = random.Random(4)
    lines = []
    for _ in range(300):
        words = [rng.choice(["to/TO", "walk/NN", "7/CD", "./."]) for _ in range(rng.randint(2, 9))]
        lines.append(" ".join(words))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(tmp_path, task: str, data: dict, family: str) -> str:
    config = {
        "task": task,
        "out_dir": str(tmp_path / task),
        "data": {**data, "vocab_size": 100, "max_len": 32},
        "model": {"family": family, "preset": "tiny", "max_len": 32},
        "train": {
            "max_steps": 80,
            "batch_tokens": 1024,
            "lr": 0.003,
            "warmup_steps": 10,
            "eval_every": 40,
            "checkpoint_every": None,
            "label_smoothing": 0.0,
        },
    }
    path = tmp_path / f"{task}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("cls")
    _write_reviews(tmp_path / "reviews.tsv")
    data = {"corpus": "file", "options": {"path": str(tmp_path / "reviews.tsv")}}
    result = qkv(
        "train", _config(tmp_path, "classification", data, "encoder_classifier"), "--quiet"
    )
    assert result.returncode == 0, result.stderr
    assert "valid_accuracy" in result.stdout
    return tmp_path / "classification"


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tag")
    _write_tagged(tmp_path / "train.txt")
    data = {"corpus": "file", "options": {"train": str(tmp_path / "train.txt")}}
    result = qkv("train", _config(tmp_path, "tagging", data, "sequence_tagger"), "--quiet")
    assert result.returncode == 0, result.stderr
    return tmp_path / "tagging"


def test_classify_evaluate_and_plot(classifier, tmp_path):
    result = qkv_process(
        "classify", "--model", str(classifier), "a superb film", "the plot was dull"
    )  # the real command once
    assert result.returncode == 0, result.stderr
    labels = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert labels == ["pos", "neg"]
    result = qkv("classify", "--model", str(classifier), "--json", "--file", "-", stdin="witty\n\n")
    row = json.loads(result.stdout)
    assert row["label"] == "pos" and row["pos"] + row["neg"] == pytest.approx(1.0, abs=1e-6)

    result = qkv("evaluate", "--model", str(classifier))
    assert result.returncode == 0, result.stderr
    accuracy = float(re.search(r"accuracy ([\d.]+)", result.stdout).group(1))
    assert accuracy >= 0.9 and "macro-F1" in result.stdout and "(n=" in result.stdout

    png = tmp_path / "attention.png"
    result = qkv("plot-attention", "--model", str(classifier), "a witty film", "-o", str(png))
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tag_and_evaluate(tagger):
    result = qkv_process("tag", "--model", str(tagger), "to walk 7.")  # the real command once
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["to/TO", "walk/NN", "7/CD", "./."]
    result = qkv("evaluate", "--model", str(tagger))
    assert result.returncode == 0, result.stderr
    assert float(re.search(r"token accuracy ([\d.]+)", result.stdout).group(1)) >= 0.95


def test_bad_input_exits_2_with_the_problem_named(classifier, tagger, tmp_path):
    for args, message in [
        (["classify", "--model", str(classifier)], "give at least one TEXT"),
        (["classify", "--model", str(tagger), "x"], "holds a tagging model"),
        (["tag", "--model", str(classifier), "x"], "holds a classification model"),
        (["tag", "--model", str(tagger), "  ,"], None),
        (["tag", "--model", str(tagger), "   "], "has no words to tag"),
        (["tag", "--model", str(tagger), "--format", "spans", "x"], "prints words, conll, json"),
        (["classify", "--model", str(tmp_path / "none"), "x"], "no model directory"),
        (
            ["plot-attention", "--model", str(classifier), "x", "-o", "a.png", "--pooling"],
            "pools with 'mean'",
        ),
        (["classify", "--model", str(classifier), "--file", str(tmp_path / "no.txt")], "no.txt"),
        (
            ["plot-attention", "--model", str(classifier), "x", "-o", "a.png", "--layer", "5"],
            "out of range",
        ),
    ]:
        result = qkv(*args)
        if message is None:  # punctuation alone is text to tag
            assert result.returncode == 0, result.stderr
            continue
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr


def test_bad_corpus_options_are_named(tmp_path):
    data = {"corpus": "file", "options": {"path": str(tmp_path / "missing.csv")}}
    config = _config(tmp_path, "classification", data, "encoder_classifier")
    result = qkv("train", config, "--quiet")
    assert result.returncode == 2 and "missing.csv" in result.stderr
    assert "Traceback" not in result.stderr

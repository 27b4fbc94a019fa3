"""The readers through the real command line: ``qkv train`` teaches each reader a small
synthetic task (the answer is the name that follows the key word in the passage) to >= 0.95
(accuracy for the cloze readers, exact match for the span readers, one of which reads each
passage in windows), ``qkv evaluate`` prints it, ``qkv answer`` answers a question about a
passage file and every question of a SQuAD file; bad requests exit 2 naming the problem."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from qkv.data.reading.cloze_synthetic import synthetic_cloze
from qkv.data.reading.squad import cloze_as_spans, write_squad
from tests.commands import qkv, qkv_process

# Each reader: its model section, its step budget and its data settings. The encoder span reader
# reads a BPE in windows of 48 ids, so every passage takes two or three. Measured at these budgets:
# 1.00 for each cloze reader and the span reader (0.99 for the attentive reader at 150 steps), 0.95
# exact match for the encoder span reader at 600 steps (hence 800).
READERS = {
    "attentive": ({"family": "cloze_reader", "preset": "tiny", "reader": "attentive"}, 200, {}),
    "stanford": ({"family": "cloze_reader", "preset": "tiny", "reader": "stanford"}, 200, {}),
    "as_reader": ({"family": "cloze_reader", "preset": "tiny", "reader": "as_reader"}, 200, {}),
    "span": ({"family": "span_reader", "preset": "tiny"}, 200, {}),
    "span_encoder": (
        {"family": "encoder_span_reader", "preset": "tiny", "casing_dim": 4},
        800,
        {"tokenizer": "bpe", "vocab_size": 200, "max_len": 48, "window_overlap": 8},
    ),
}
SPAN_READERS = ("span", "span_encoder")


def _train(folder, reader: str) -> tuple[object, object]:
    model, steps, data = READERS[reader]
    config = {
        "task": "reading",
        "out_dir": str(folder / reader),
        "data": {"corpus": "synthetic", "options": {"n": 2000}, "min_count": 1, **data},
        "model": model,
        "train": {
            "max_steps": steps,
            "batch_tokens": 2048,
            "lr": 0.005,
            "schedule": "constant",
            "warmup_steps": 10,
            "eval_every": steps // 2,
            "checkpoint_every": None,
            "tensorboard": False,
        },
    }
    path = folder / f"{reader}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return qkv("train", str(path), "--quiet"), folder / reader


@pytest.fixture(scope="module", params=list(READERS))
def trained(request, tmp_path_factory):
    result, out = _train(tmp_path_factory.mktemp("reading"), request.param)
    assert result.returncode == 0, result.stderr
    return request.param, out


def test_each_reader_learns_the_synthetic_task(trained):
    reader, out = trained
    result = qkv("evaluate", "--model", str(out))
    assert result.returncode == 0, result.stderr
    if reader in SPAN_READERS:
        score = float(re.search(r"exact match ([\d.]+)", result.stdout).group(1)) / 100
    else:
        score = float(re.search(r"accuracy ([\d.]+)", result.stdout).group(1))
    assert score >= 0.95, result.stdout
    assert json.loads((out / "results.json").read_text())["test"]["questions"] > 0


def test_answer_reads_a_passage_file_and_a_squad_file(trained, tmp_path):
    _, out = trained
    question = synthetic_cloze(5, seed=99).test[0]
    (tmp_path / "passage.txt").write_text(" ".join(question.passage), encoding="utf-8")
    asked = " ".join(question.question)
    result = qkv_process(
        "answer", "--model", str(out), "--context", str(tmp_path / "passage.txt"), asked
    )
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0].split("\t")
    assert first[0] == question.answer and float(first[1]) > 0.5, result.stdout
    assert "[[" in result.stdout.splitlines()[1]

    questions = cloze_as_spans(synthetic_cloze(40, seed=98).test)
    write_squad(questions, tmp_path / "dev.json")
    result = qkv("answer", "--model", str(out), "--squad", str(tmp_path / "dev.json"), "-o",
                 str(tmp_path / "predictions.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    match = re.search(r"exact match ([\d.]+)\s+F1 ([\d.]+)", result.stdout)
    assert match and float(match.group(1)) >= 90, result.stdout
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    assert set(predictions) == {q.id for q in questions}


def test_bad_requests_exit_2(trained, tmp_path):
    reader, out = trained
    (tmp_path / "p.txt").write_text("the key opens Kalo .", encoding="utf-8")
    cases = [
        (["answer", "--model", str(out), "who?"], "give --context FILE"),
        (["answer", "--model", str(out), "--context", str(tmp_path / "p.txt")], "at least one"),
        (["answer", "--model", str(out), "--squad", str(tmp_path / "none.json")], "none.json"),
    ]
    if reader not in SPAN_READERS:
        cases.append(
            (
                ["answer", "--model", str(out), "--context", str(tmp_path / "p.txt"), "who?"],
                "XXXXX exactly once",
            )
        )
    for args, message in cases:
        result = qkv(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_cloze_reader_refuses_span_only_data(tmp_path):
    config = {
        "task": "reading",
        "out_dir": str(tmp_path / "x"),
        "data": {"corpus": "squad", "options": {"train": str(tmp_path / "t.json")}},
        "model": {"family": "cloze_reader", "preset": "tiny"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = qkv("train", str(tmp_path / "c.yaml"), "--quiet")
    assert result.returncode == 2 and "a cloze reader picks among candidates" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("model", "data", "message"),
    [
        ({"family": "encoder_span_reader", "preset": "tiny"}, {}, "reads data.tokenizer bpe or"),
        ({"family": "span_reader", "preset": "tiny"}, {"tokenizer": "bpe"}, "reads data.tokenizer"),
        (
            {"family": "span_reader", "preset": "tiny", "pretrained": "minilm"},
            {},
            "a span_reader has none",
        ),
    ],
)
def test_a_reader_refuses_inputs_it_cannot_read(tmp_path, model, data, message):
    config = {
        "task": "reading",
        "out_dir": str(tmp_path / "x"),
        "data": {"corpus": "synthetic", "options": {"n": 50}, **data},
        "model": model,
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = qkv("train", str(tmp_path / "c.yaml"), "--quiet")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x").exists()

"""A span reader's answers through the library and ``qkv answer``: what it is given that it
cannot use is refused (candidates, an empty question, named by its SQuAD id), and its answer
shows the two distributions it computes, not their sum."""

from __future__ import annotations

import json
import re

import pytest

from qkv.cli.main import main
from qkv.data.reading.squad import SpanQuestion, write_squad
from qkv.tasks.reading.runner import Reader
from tests.explorer.models import _train, _write

pytestmark = pytest.mark.usefixtures("one_thread")

PASSAGE = "the key opens Kalo . the door holds Mira ."


@pytest.fixture(scope="module")
def span_dir(tmp_path_factory):
    """A span reader trained for two steps: these tests read what it reports, not how well."""
    folder = tmp_path_factory.mktemp("span")
    config = _write(folder / "span.yaml", {
        "task": "reading",
        "out_dir": str(folder / "span"),
        "data": {"corpus": "synthetic", "options": {"n": 50}, "min_count": 1},
        "model": {"family": "span_reader", "preset": "tiny"},
        "train": {"max_steps": 2, "batch_tokens": 1024, "warmup_steps": 1, "eval_every": 2,
                  "checkpoint_every": None, "tensorboard": False},
    })  # fmt: skip
    _train(config, [])
    return folder / "span"


def test_a_span_readers_words_show_its_start_and_end_probabilities(span_dir):
    """``marked`` printed ``word{2.00}``, the sum of two distributions over the passage."""
    answer = Reader.load(span_dir).answer("who does the key open ?", PASSAGE)
    shown = re.findall(r"(\S+)\{start ([\d.]+) end ([\d.]+)\}", answer.marked(top=3))
    assert len(shown) == 3 and "{" not in re.sub(
        r"\{start [\d.]+ end [\d.]+\}", "", answer.marked(3)
    )
    words = PASSAGE.split()
    for word, start, end in shown:
        i = words.index(word.strip("[]"))
        assert float(start) == pytest.approx(answer.start[i], abs=0.005)
        assert float(end) == pytest.approx(answer.end[i], abs=0.005)
    assert sum(answer.start) == pytest.approx(1.0, abs=1e-4)
    assert sum(answer.end) == pytest.approx(1.0, abs=1e-4)


def test_candidates_and_an_empty_question_are_refused_by_a_span_reader(span_dir):
    reader = Reader.load(span_dir)
    with pytest.raises(ValueError, match="takes no candidates"):
        reader.answer("who does the key open ?", PASSAGE, ["Kalo", "Mira"])
    with pytest.raises(ValueError, match="the question has no words"):
        reader.answer(" \t ", PASSAGE)
    squad = [SpanQuestion("q7", PASSAGE, "  ", (("Kalo", 14),))]
    with pytest.raises(ValueError, match="SQuAD question 'q7' has no words"):
        reader.answer_squad(squad)


def test_answer_refuses_candidates_and_names_an_empty_squad_question(span_dir, tmp_path, capsys):
    passage = tmp_path / "p.txt"
    passage.write_text(PASSAGE, encoding="utf-8")
    model = ["answer", "--model", str(span_dir)]
    assert main([*model, "--context", str(passage), "--candidates", "Kalo,Mira", "who?"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "qkv answer: error: " in err and "--candidates" in err
    file = tmp_path / "dev.json"
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": PASSAGE, "qas": [
        {"id": "a1", "question": "who?", "answers": [{"text": "Kalo", "answer_start": 14}]},
        {"id": "q7", "question": "   ", "answers": [{"text": "Kalo", "answer_start": 14}]},
    ]}]}]}  # fmt: skip
    file.write_text(json.dumps(squad), encoding="utf-8")
    assert main([*model, "--squad", str(file)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "question 'q7': the question is empty" in err
    write_squad([SpanQuestion("q1", PASSAGE, "who?", (("Kalo", 14),))], tmp_path / "ok.json")
    assert main([*model, "--squad", str(tmp_path / "ok.json")]) == 0

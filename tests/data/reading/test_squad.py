"""SQuAD v1.1 files: a round trip through write_squad and read_squad, every malformed file named
with its first bad place, the held-out articles of a training file, and cloze questions written
as spans."""

from __future__ import annotations

import json
import zlib

import pytest

from qkv.data.errors import DataError
from qkv.data.reading.cloze_synthetic import synthetic_cloze
from qkv.data.reading.squad import (
    SpanQuestion,
    cloze_as_spans,
    load_cloze_corpus,
    load_span_corpus,
    read_squad,
    write_squad,
)

CONTEXT = "Super Bowl 50 was played in Santa Clara, California. The Broncos won."


def squad_file(path, data) -> str:
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return str(path)


def article(title="Super_Bowl_50", qas=None, context=CONTEXT):
    if qas is None:
        qas = [{"id": "q1", "question": "Where?", "answers": [
            {"text": "Santa Clara", "answer_start": 28},
            {"text": "Santa Clara, California", "answer_start": 28},
        ]}]  # fmt: skip
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


def test_reads_a_squad_file(tmp_path):
    (q,) = read_squad(squad_file(tmp_path / "a.json", [article()]))
    assert q == SpanQuestion(
        "q1", CONTEXT, "Where?", (("Santa Clara", 28), ("Santa Clara, California", 28))
    )


def test_write_then_read_round_trips_and_groups_shared_contexts(tmp_path):
    questions = [
        SpanQuestion("a", CONTEXT, "Who won?", (("The Broncos", 53), ("Broncos", 57))),
        SpanQuestion("b", "Élan — naïve “text”.", "What?", (("naïve", 7),)),
        SpanQuestion("c", CONTEXT, "Where?", (("Santa Clara", 28),)),
    ]
    path = tmp_path / "out" / "q.json"
    write_squad(questions, path, title="mine")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["version"] == "1.1"
    (only,) = document["data"]
    assert only["title"] == "mine"
    assert [len(p["qas"]) for p in only["paragraphs"]] == [2, 1]
    assert sorted(read_squad(path), key=lambda q: q.id) == questions
    assert [p.name for p in path.parent.iterdir()] == ["q.json"]  # no temporary left


def test_write_refuses_duplicate_ids(tmp_path):
    q = SpanQuestion("a", CONTEXT, "?", (("Broncos", 57),))
    with pytest.raises(DataError, match="two questions have the id 'a'"):
        write_squad([q, q], tmp_path / "q.json")
    assert not (tmp_path / "q.json").exists()


def qa(**changes):
    base = {"id": "q9", "question": "Who?", "answers": [{"text": "Broncos", "answer_start": 57}]}
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([article(qas=[qa(answers=[{"text": "Broncos", "answer_start": 50}])])],
         r"article 0 \('Super_Bowl_50'\), paragraph 0, question 'q9', answer 0: 'Broncos' is "
         r"not at answer_start=50 of the context \(found 'a. The '\)"),
        ([article(qas=[qa(answers=[{"text": "Broncos", "answer_start": -1}])])],
         "not at answer_start=-1"),
        ([article(qas=[qa(answers=[{"text": "Broncos", "answer_start": "57"}])])],
         r"answer 0: 'answer_start' must be a JSON int"),
        ([article(qas=[qa(answers=[{"text": "Broncos"}])])], "no 'answer_start' field"),
        ([article(qas=[{"question": "Who?", "answers": []}])],
         r"article 0 \('Super_Bowl_50'\), paragraph 0, question 0: no 'id' field"),
        ([article(qas=[qa(), qa()])], r"question 'q9': duplicate id \(first at article 0"),
        ([article(), article(title="Other")], r"article 1 \('Other'\).*'q1': duplicate id"),
        ([article(qas=[qa(answers=[])])], "empty answers list .* SQuAD v1.1 only"),
        ([article(qas=[qa(answers=[], is_impossible=True)])], "is_impossible.* SQuAD v1.1 only"),
        ([article(qas=[qa(question=None)])], "'question' must be a JSON str"),
        ([{"paragraphs": []}], r"article 0: no 'title' field"),
        ([{"title": "T", "paragraphs": [{"qas": []}]}], r"'T'\), paragraph 0: no 'context'"),
        ([article(qas=[])], "no questions"),
        ({"title": "x"}, "'data' must be a JSON list"),
        ([article(qas=[qa(answers=[{"text": " ", "answer_start": 56}])])],
         r"question 'q9', answer 0: the answer ' ' is empty or only whitespace"),
        ([article(qas=[qa(answers=[{"text": "", "answer_start": 3}])])],
         r"question 'q9', answer 0: the answer '' is empty"),
        ([article(qas=[qa(question=" \t\n")])], r"question 'q9': the question is empty"),
    ],
)  # fmt: skip
def test_malformed_files_are_named_with_the_first_bad_place(tmp_path, data, message):
    path = squad_file(tmp_path / "bad.json", data)
    with pytest.raises(DataError, match=message) as caught:
        read_squad(path)
    assert "bad.json" in str(caught.value)


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_squad(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(DataError, match=r"x\.json: not JSON"):
        read_squad(tmp_path / "x.json")
    (tmp_path / "y.json").write_bytes(b'{"data": "\xff"}')
    with pytest.raises(DataError, match=r"y\.json:1: not valid UTF-8"):
        read_squad(tmp_path / "y.json")
    (tmp_path / "z.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="expected a JSON object"):
        read_squad(tmp_path / "z.json")


def test_a_file_nested_100000_levels_deep_is_a_data_error_not_a_recursion_error(tmp_path):
    """``json.loads`` raises ``RecursionError`` (not ``JSONDecodeError``) on deep nesting."""
    for name, text in (("lists.json", "[" * 100_000 + "]" * 100_000),
                       ("objects.json", '{"data": ' * 100_000 + "1" + "}" * 100_000)):  # fmt: skip
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(DataError, match=rf"{name}: JSON nested too deeply to read"):
            read_squad(tmp_path / name)


def test_a_span_question_checks_its_answers():
    with pytest.raises(DataError, match="'x': answer ' ' is empty or whitespace"):
        SpanQuestion("x", CONTEXT, "?", ((" ", 5),))
    with pytest.raises(DataError, match="'x': answer 'Bowl' is not at answer_start=0"):
        SpanQuestion("x", CONTEXT, "?", (("Bowl", 0),))
    with pytest.raises(DataError, match="no answer"):
        SpanQuestion("x", CONTEXT, "?", ())


def test_squad_corpus_holds_out_whole_articles_by_the_crc_of_their_title(tmp_path):
    titles = [f"Article_{i}" for i in range(200)]
    data = [article(t, qas=[qa(id=f"{t}-{j}") for j in range(2)]) for t in titles]
    train = squad_file(tmp_path / "train-v1.1.json", data)
    test = squad_file(tmp_path / "dev-v1.1.json", [article()])
    corpus = load_span_corpus("squad", train=train, test=test)
    held = {t for t in titles if zlib.crc32(t.encode()) % 100 < 5}
    assert 0 < len(held) < 30
    assert {q.id.rsplit("-", 1)[0] for q in corpus.valid} == held
    assert not {q.id.rsplit("-", 1)[0] for q in corpus.train} & held
    assert len(corpus.train) + len(corpus.valid) == 400
    assert [q.id for q in corpus.test] == ["q1"]
    assert corpus.name == "train-v1.1"
    assert f"the {len(held)} whole articles" in corpus.split_note
    with_valid = load_span_corpus("squad", train=train, test=test, valid=test)
    assert len(with_valid.train) == 400 and with_valid.split("valid") == corpus.test


def test_the_cloze_corpora_by_name_are_the_loaders_and_the_spans_are_theirs():
    corpus = load_cloze_corpus("synthetic", n=6, seed=2)
    assert corpus == synthetic_cloze(6, seed=2)
    spans = load_span_corpus("synthetic", n=6, seed=2)
    assert spans.split("test") == cloze_as_spans(corpus.test)
    with pytest.raises(DataError, match=r"cloze corpus 'synthetic' needs option\(s\) \['n'\]"):
        load_cloze_corpus("synthetic")
    with pytest.raises(DataError, match="unknown cloze corpus 'squad'; known: cloze, synthetic"):
        load_cloze_corpus("squad")


def test_span_corpus_options_are_checked(tmp_path):
    with pytest.raises(DataError, match="unknown span corpus 'sqad'; known: cloze, synthetic"):
        load_span_corpus("sqad")
    with pytest.raises(DataError, match=r"needs the option\(s\) \['test'\]"):
        load_span_corpus("squad", train="x.json")
    with pytest.raises(DataError, match=r"span corpus 'synthetic'.*unexpected keyword.*colour"):
        load_span_corpus("synthetic", n=3, colour="red")
    with pytest.raises(DataError, match="unknown split 'dev'"):
        load_span_corpus("synthetic", n=3).split("dev")


def test_cloze_questions_as_spans_mark_every_occurrence_of_the_answer():
    corpus = synthetic_cloze(30, seed=3)
    spans = cloze_as_spans(corpus.train)
    for cloze, span in zip(corpus.train, spans, strict=True):
        assert span.id == cloze.source
        assert span.context == " ".join(cloze.passage)
        assert span.question.split() == list(cloze.question)
        assert len(span.answers) == cloze.passage.count(cloze.answer) >= 1
        assert all(text == cloze.answer for text, _ in span.answers)
        # every start is a token boundary of the context
        assert all(s == 0 or span.context[s - 1] == " " for _, s in span.answers)
    spans_corpus = load_span_corpus("synthetic", n=30, seed=3)
    assert spans_corpus.train == spans and spans_corpus.name == corpus.name

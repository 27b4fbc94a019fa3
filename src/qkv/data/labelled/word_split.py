"""How raw text becomes words for a tagger: the word-splitting scheme of its training corpus.

A tagger labels words, so text to tag must first be split into words, and split the way its
training corpus was: a model trained on ``@Cromwell`` as one token and asked about ``@``,
``Cromwell`` reads a tokenisation it never saw, and its word-shape feature
(:mod:`qkv.data.labelled.word_shape`) never sees the mention. The scheme is therefore a
property of the trained model: ``data.splitter`` of a tagging or entity run, chosen by the
corpus unless the configuration names one (:func:`corpus_splitter`), saved in the run's
``config.json`` and used for every raw text the trained model reads.

- ``plain``: words (``don't``, ``3.5``, ``e.g`` kept whole) and single punctuation marks,
  for edited text: news, CoNLL files, and the ``pos`` corpus, which has no mentions,
  hashtags or links to keep whole (two ``http`` tokens in its 17,420 training sentences).
- ``tweets``: as WNUT-16's tweets are tokenised (Strauss et al. 2016): links, e-mail
  addresses, ``@mentions`` and ``#hashtags`` whole, with trailing punctuation split off
  (``@user:`` is ``@user``, ``:``); emoticons (``:)``, ``;-)``, ``-_-``), abbreviations
  (``U.K.``, ``p.m.``), numbers with separators (``7:30``, ``30,000``, ``$5``, ``100%``),
  words joined by a slash (``w/``, ``and/or``) and runs of punctuation (``!!``, ``..."``,
  with HTML entities such as ``&amp;`` inside them) as one token; the clitic ``'s`` apart
  from its word (``Obama 's``) while ``I'm`` and ``don't`` stay whole, as in the corpus.
  Re-splitting the WNUT-16 training split's own tokens joined by spaces gives them back for
  1,686 of its 1,895 tweets (89.0%; the plain scheme: 324, 17.1%): the rest hold tokens the
  corpus left glued to their punctuation (``polydactyl)``, ``*cough*``, ``'RT``) or clitics
  it split only sometimes (``'m`` 17 times beside ``I'm`` 111 times).

Runs saved before the scheme was recorded have no ``data.splitter``: they get their corpus's
scheme (:func:`corpus_splitter`), so an old ``wnut16`` model reads tweets as it was trained
on them and every other old run splits as it always did (``plain``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "CORPUS_SPLITTERS",
    "SPLITTERS",
    "check_splitter",
    "corpus_splitter",
    "split_plain",
    "split_tweets",
    "word_splitter",
]

_PLAIN = re.compile(r"\w+(?:[-'\u2019.]\w+)*|[^\w\s]")

_ENTITY = r"&(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);"  # as tweets of the time carry them
_TRAILING = r"""[.,;:!?)\]}'"\u2019]"""  # punctuation after a link belongs to the sentence
_TWEET = re.compile(
    r"(?:https?://|www\.)\S+?(?=" + _TRAILING + r"*(?:\s|$))"  # links
    r"|[\w.+-]+@\w+(?:[-.]\w+)*\.[A-Za-z]{2,}"  # e-mail addresses
    r"|[@#]\w+"  # mentions, hashtags
    r"|(?<!\w)(?:[:;=][-o'^]?[)\](\[dDpPoO/\\|*3]|-_-|<3)(?!\w)"  # emoticons
    r"|(?:[A-Za-z]\.){2,}(?!\w)"  # abbreviations: U.K., p.m.
    r"|['\u2019]s\b"  # the clitic 's
    r"|\$?\w+(?:(?!['\u2019]s\b)[-'\u2019./]\w+|[,:]\d+|&amp;\w+)*(?:%|/(?!\w))?"  # words
    r"|(?:" + _ENTITY + r"|(?![@#]\w)[^\w\s])+"  # runs of punctuation: !!, ..., ?!
)


def split_plain(text: str) -> list[str]:
    """Words and single punctuation marks (``"don't stop."`` -> ``don't``, ``stop``, ``.``)."""
    return _PLAIN.findall(text)


def split_tweets(text: str) -> list[str]:
    """Words as WNUT-16 tokenises tweets (module doc): ``"@Cromwell: see http://x.co/a?b=1."``
    -> ``@Cromwell``, ``:``, ``see``, ``http://x.co/a?b=1``, ``.``."""
    return [match.group(0) for match in _TWEET.finditer(text)]


_SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "plain": split_plain,
    "tweets": split_tweets,
}
SPLITTERS = tuple(_SPLITTERS)
"""The names of the schemes."""

CORPUS_SPLITTERS = {"wnut16": "tweets"}
"""The scheme of each named corpus whose text is not split the plain way (any other corpus,
``file`` included, is ``plain`` unless ``data.splitter`` says otherwise)."""


def corpus_splitter(corpus: str) -> str:
    """The scheme ``corpus`` was tokenised with: ``tweets`` for ``wnut16``, else ``plain``."""
    return CORPUS_SPLITTERS.get(corpus, "plain")


def check_splitter(name: object, what: str = "data.splitter") -> str:
    """``name`` if it names a scheme, else a ``ValueError`` naming it and the schemes."""
    if not isinstance(name, str) or name not in _SPLITTERS:
        raise ValueError(
            f"{what} must be one of {', '.join(SPLITTERS)} (left out: the corpus's own, "
            f"{', '.join(f'{s} for {c}' for c, s in CORPUS_SPLITTERS.items())}, else plain), "
            f"got {name!r}"
        )
    return name


def word_splitter(name: str) -> Callable[[str], list[str]]:
    """The function of the scheme ``name`` (:data:`SPLITTERS`): raw text -> words."""
    return _SPLITTERS[check_splitter(name, "a word splitter")]

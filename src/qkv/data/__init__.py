"""Data for translation: special tokens, subword tokenizers, parallel corpora and batching.

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

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.data.pairs.batching import (
    Example,
    Seq2SeqBatch,
    batches,
    collate,
    encode_pairs,
    example_cost,
    plan_batches,
)
from qkv.data.pairs.parallel import (
    Pair,
    ParallelCorpus,
    load_aligned_corpus,
    load_tsv_corpus,
    read_aligned_files,
    read_tsv_pairs,
    split_pairs,
)
from qkv.data.pairs.registry import CORPORA, corpus_options, load_corpus
from qkv.data.pairs.reverse import reverse_task
from qkv.data.sources.bible import (
    BIBLE_INSTALL,
    BIBLE_TRANSLATIONS,
    bible_db_path,
    bible_split_of,
    clean_verse,
    load_bible_pair,
)
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID
from qkv.data.tokens.subword import SubwordTokenizer

__all__ = [
    "BIBLE_INSTALL",
    "BIBLE_TRANSLATIONS",
    "BOS_ID",
    "CORPORA",
    "EOS_ID",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "DataError",
    "DatasetUnavailable",
    "Example",
    "Pair",
    "ParallelCorpus",
    "Seq2SeqBatch",
    "SubwordTokenizer",
    "batches",
    "bible_db_path",
    "bible_split_of",
    "clean_verse",
    "collate",
    "corpus_options",
    "encode_pairs",
    "example_cost",
    "load_aligned_corpus",
    "load_bible_pair",
    "load_corpus",
    "load_tsv_corpus",
    "plan_batches",
    "read_aligned_files",
    "read_tsv_pairs",
    "reverse_task",
    "split_pairs",
]

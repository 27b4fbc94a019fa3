"""Tokens and vocabularies: the special ids, BPE subword tokenizers, character vocabularies, the
word tokenizer of passages and questions, and word vocabularies."""

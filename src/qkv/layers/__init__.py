"""Reusable layers built on the attention core: positional encodings, embeddings, blocks."""

from qkv.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = ["LearnedPositionalEmbedding", "SinusoidalPositionalEncoding"]

"""Reusable layers built on the attention core: positional encodings, feed-forward networks,
Transformer blocks and stacks, recurrent encoders and attention decoders, text encoders and
poolings for classifiers and taggers."""

from qkv.layers.feedforward import PositionwiseFeedForward
from qkv.layers.pooling import AttentionPooling, PoolOutput, StructuredSelfAttention
from qkv.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from qkv.layers.recurrent import EncoderOutput, RecurrentDecoder, RecurrentEncoder, RecurrentState
from qkv.layers.recurrent_decoders import BahdanauDecoder, FixedContextDecoder, LuongDecoder
from qkv.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "AttentionPooling",
    "BahdanauDecoder",
    "EncoderOutput",
    "FixedContextDecoder",
    "LearnedPositionalEmbedding",
    "LuongDecoder",
    "PoolOutput",
    "PositionwiseFeedForward",
    "RecurrentDecoder",
    "RecurrentEncoder",
    "RecurrentState",
    "SinusoidalPositionalEncoding",
    "StructuredSelfAttention",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

"""Reusable layers built on the attention core: positional encodings, feed-forward networks,
Transformer blocks and stacks, recurrent encoders and attention decoders."""

from qkv.layers.feedforward import PositionwiseFeedForward
from qkv.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from qkv.layers.recurrent import (
    BahdanauDecoder,
    EncoderOutput,
    FixedContextDecoder,
    LuongDecoder,
    RecurrentDecoder,
    RecurrentEncoder,
    RecurrentState,
)
from qkv.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "BahdanauDecoder",
    "EncoderOutput",
    "FixedContextDecoder",
    "LearnedPositionalEmbedding",
    "LuongDecoder",
    "PositionwiseFeedForward",
    "RecurrentDecoder",
    "RecurrentEncoder",
    "RecurrentState",
    "SinusoidalPositionalEncoding",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

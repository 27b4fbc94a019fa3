"""The attention core: masks, score functions, ``attend``, multi-head and hard attention, caches.

Mask convention (the only one in qkv): boolean, ``True`` = may attend, broadcastable to
``(B, H, Tq, Tk)``; additive float biases are passed separately as ``bias``.
"""

from qkv.attention.alibi import alibi_bias, alibi_slopes
from qkv.attention.core import AttentionOutput, attend, masked_softmax
from qkv.attention.flow import attention_flow
from qkv.attention.hard import HardAttention, HardAttentionOutput
from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import (
    causal_mask,
    combine_masks,
    from_key_padding,
    padding_mask,
)
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.neuron import NeuronView, neuron_view
from qkv.attention.rollout import attention_rollout
from qkv.attention.rotary import RotaryEmbedding
from qkv.attention.scores import Additive, Dot, General, Location, ScaledDot, Score

__all__ = [
    "Additive",
    "AttentionOutput",
    "Dot",
    "General",
    "HardAttention",
    "HardAttentionOutput",
    "KVCache",
    "Location",
    "MultiHeadAttention",
    "NeuronView",
    "RotaryEmbedding",
    "ScaledDot",
    "Score",
    "alibi_bias",
    "alibi_slopes",
    "attend",
    "attention_flow",
    "attention_rollout",
    "causal_mask",
    "combine_masks",
    "from_key_padding",
    "masked_softmax",
    "neuron_view",
    "padding_mask",
]

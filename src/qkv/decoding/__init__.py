"""Decoding: greedy and beam search over the step protocol for every model that writes a
sequence from an encoded input (translation, captioning), and greedy or sampled generation for
language models.

Models never own a ``generate()``: they implement :class:`StepModel` (or :class:`CausalLM`) and
these functions decode them.
"""

from qkv.decoding.beam import beam_search, gnmt_length_penalty
from qkv.decoding.greedy import greedy_search
from qkv.decoding.hypothesis import Hypothesis
from qkv.decoding.protocol import Encoding, StepModel
from qkv.decoding.sampling import CausalLM, Generation, SamplingConfig, generate

__all__ = [
    "CausalLM",
    "Encoding",
    "Generation",
    "Hypothesis",
    "SamplingConfig",
    "StepModel",
    "beam_search",
    "generate",
    "gnmt_length_penalty",
    "greedy_search",
]

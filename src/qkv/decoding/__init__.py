"""Decoding: greedy and beam search over the step protocol, for every model family.

Models never own a ``generate()``: they implement :class:`StepModel` and these functions decode
them.
"""

from qkv.decoding.beam import beam_search, gnmt_length_penalty
from qkv.decoding.greedy import greedy_search
from qkv.decoding.hypothesis import Hypothesis
from qkv.decoding.protocol import StepModel

__all__ = ["Hypothesis", "StepModel", "beam_search", "gnmt_length_penalty", "greedy_search"]

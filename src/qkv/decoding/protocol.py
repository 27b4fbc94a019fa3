"""The step protocol: what a model offers so that greedy, beam and sampling can decode it.

The RNN encoder-decoder, the Transformer and (later) decoder-only language models implement the
same four methods, so every search algorithm serves them all and no model owns a ``generate()``.

    encoded = model.encode(src, src_lengths)       # once per batch
    state = model.init_state(encoded)              # decoder state before the first token
    out = model.step(tokens, state)                # (B,) -> StepOutput(log_probs (B, V), ...)
    state = model.select_state(out.state, index)   # keep/reorder/repeat rows (beam search)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor

from qkv.models.outputs import StepOutput


@runtime_checkable
class StepModel(Protocol):
    """A model that can be decoded one token at a time."""

    def encode(self, src: Tensor, src_lengths: Tensor) -> object:
        """Encode ``src (B, S)`` token ids with true lengths ``(B,)``; returns an opaque value."""
        ...

    def init_state(self, encoded: object) -> object:
        """The decoder state before the first target token."""
        ...

    def step(self, tokens: Tensor, state: object) -> StepOutput:
        """Feed the previous tokens ``(B,)``; return log-probabilities ``(B, V)`` and the state."""
        ...

    def select_state(self, state: object, index: Tensor) -> object:
        """Rows ``index (B',)`` of every tensor in ``state`` (the encoder's memory included)."""
        ...

"""The step protocol: what a model offers so that greedy and beam search can decode it.

The RNN encoder-decoder, the Transformer and the Show-Attend-Tell captioner implement the same
four methods, so one greedy and one beam search serve them all and no model owns a
``generate()``. A search hands its ``*inputs`` to ``encode`` untouched: a source batch
``(src, src_lengths)``, a batch of image strips ``(images, keep)``, whatever the model encodes.

    encoded = model.encode(*inputs)                # once per batch
    state = model.init_state(encoded)              # decoder state before the first token
    out = model.step(tokens, state)                # (B,) -> StepOutput(log_probs (B, V), ...)
    state = model.select_state(out.state, index)   # keep/reorder/repeat rows (beam search)

Of the encoding, a search reads one thing: ``encoded.keep``, the positions that a step's
attention ``(B, S)`` covers (:class:`Encoding`). Its first dimension is the batch size, and each
hypothesis keeps the attention columns of its real positions only (a sentence's padding, a
strip's padded tiles), in their order.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from qkv.models.outputs import StepOutput


class Encoding(Protocol):
    """What :meth:`StepModel.encode` returns, as far as the searches are concerned."""

    @property
    def keep(self) -> Tensor:
        """``(B, 1, .., 1, S)`` bool (any singleton dims between ``B`` and ``S``), ``True`` at
        the real positions of the ``S`` that :attr:`StepOutput.attention` covers."""
        ...


@runtime_checkable
class StepModel(Protocol):
    """A model that can be decoded one token at a time."""

    def encode(self, *inputs: Any) -> Encoding:
        """Encode one batch of the model's inputs (``src (B, S)`` token ids and their lengths
        ``(B,)``; ``images`` and their region ``keep``); the rest of the value is opaque."""
        ...

    def init_state(self, encoded: Any) -> object:
        """The decoder state before the first target token."""
        ...

    def step(self, tokens: Tensor, state: Any) -> StepOutput:
        """Feed the previous tokens ``(B,)``; return log-probabilities ``(B, V)`` and the state."""
        ...

    def select_state(self, state: Any, index: Tensor) -> object:
        """Rows ``index (B',)`` of every tensor in ``state`` (the encoder's memory included)."""
        ...

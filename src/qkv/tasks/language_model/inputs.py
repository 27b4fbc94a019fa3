"""A language model's data: its tokenizer (characters, or byte-level BPE) and the token
stream cut into windows of ``block_size + 1`` tokens (inputs and next-token targets); each epoch
starts the windows at a different offset and shuffles them, both a pure function of
``(seed, epoch)``, so a resumed run sees the same data."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.tokens.chars import CharTokenizer, is_char_vocabulary
from qkv.data.tokens.subword import SubwordTokenizer
from qkv.tasks.language_model.config import LMDataConfig

Tokenizer = CharTokenizer | SubwordTokenizer


@dataclass(frozen=True)
class LMBatch:
    """``inputs (B, T)`` and their next tokens ``targets (B, T)``."""

    inputs: Tensor
    targets: Tensor

    def to(self, device: torch.device | str) -> LMBatch:
        return LMBatch(self.inputs.to(device), self.targets.to(device))


def lm_batches(
    ids: Tensor,
    *,
    block_size: int,
    batch_size: int,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
    shuffle: bool = True,
) -> Iterator[LMBatch]:
    """The batches of one epoch over the token stream ``ids (N,)``, skipping the first
    ``start``. Windows of ``block_size + 1`` tokens do not overlap; with ``shuffle`` their
    offset and order come from ``numpy.random.default_rng([seed, epoch])``."""
    span = block_size + 1
    if ids.numel() < span:
        raise ValueError(
            f"the text has {ids.numel()} tokens, fewer than one window of block_size + 1 = {span}"
        )
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(0, block_size)) if shuffle else 0
    count = (ids.numel() - offset) // span
    starts = offset + span * np.arange(count)
    if shuffle:
        starts = rng.permutation(starts)
    windows = torch.as_tensor(starts)
    for first in range(start * batch_size, count, batch_size):
        chunk = windows[first : first + batch_size]
        rows = torch.stack([ids[s : s + span] for s in chunk.tolist()])  # (B, T + 1)
        yield LMBatch(rows[:, :-1], rows[:, 1:])


def lm_loss(model: nn.Module, batch: LMBatch) -> tuple[Tensor, Tensor]:
    """Summed next-token cross-entropy (nats) and the number of predicted tokens."""
    logits = model(batch.inputs).logits  # (B, T, V)
    loss = F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), reduction="sum")
    return loss, torch.tensor(batch.targets.numel())


def train_tokenizer(data: LMDataConfig, text: str) -> Tokenizer:
    if data.tokenizer == "char":
        return CharTokenizer.train(text)
    return SubwordTokenizer.train(text.splitlines(keepends=True), data.vocab_size, byte_level=True)


def load_tokenizer(path: Path) -> Tokenizer:
    return CharTokenizer.load(path) if is_char_vocabulary(path) else SubwordTokenizer.load(path)

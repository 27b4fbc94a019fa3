"""A half-learnt translation model for the lean decode steps' tests: trained briefly to reverse
random token sequences, so its greedy and beam outputs vary in length and content and end with
EOS of their own accord (searches in which sentences finish at different steps)."""

from __future__ import annotations

from typing import TypeVar

import torch
from torch import Tensor, nn

M = TypeVar("M", bound=nn.Module)

LENGTHS = [7, 3, 9, 1, 5, 8]  # a test batch's source lengths, padded to 9


def train_to_reverse(
    model: nn.Module, vocab: int, *, steps: int, lr: float, seed: int
) -> nn.Module:
    """``model`` (``model(src, lengths, tgt_in).logits``) after ``steps`` Adam steps on batches
    of 32 sources of 1-9 tokens, target their reverse then EOS (2); in eval mode."""
    model.train()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        lengths = torch.randint(1, 10, (32,), generator=generator)
        src = torch.randint(4, vocab, (32, 9), generator=generator)
        src[torch.arange(9)[None, :] >= lengths[:, None]] = 0
        tgt = torch.zeros(32, 11, dtype=torch.long)
        for row, n in enumerate(lengths.tolist()):
            tgt[row, 1 : n + 1] = src[row, :n].flip(0)
            tgt[row, n + 1] = 2  # EOS
        tgt[:, 0] = 1  # BOS
        logits = model(src, lengths, tgt[:, :-1]).logits  # (32, 10, V)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1), ignore_index=0
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def source_batch(vocab: int, seed: int = 1) -> tuple[Tensor, Tensor]:
    """``src (6, 9)`` random tokens right-padded with 0 to :data:`LENGTHS`, and the lengths."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(LENGTHS)
    src = torch.zeros(len(LENGTHS), max(LENGTHS), dtype=torch.long)  # padded with 0
    for row, n in enumerate(LENGTHS):
        src[row, :n] = torch.randint(4, vocab, (n,), generator=generator)
    return src, lengths

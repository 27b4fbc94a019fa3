"""From sentence pairs to padded tensors: encoding, collation and length-grouped batches.

An *example* is ``(source_ids, target_ids)``, two lists of subword ids without special tokens.
:func:`collate` turns examples into a :class:`Seq2SeqBatch` (the layout of
``docs/design/seq2seq-interfaces.md``)::

    source  x1 x2 x3          ->  src     = x1 x2 x3 </s>          src_lengths = 4
    target  y1 y2             ->  tgt_in  = <s> y1 y2  <pad>...
                                  tgt_out = y1  y2 </s> <pad>...

:func:`batches` groups sentences of similar length to waste little padding: the examples are
shuffled, cut into pools of ``pool_size``, each pool is sorted by length and chunked under a token
budget, and the batch order is shuffled again. The cost of a batch is its *padded* size,
``B * max(S, T)``, so neither the ``(B, S)`` source nor the ``(B, T)`` target tensor exceeds
``max_tokens``. Everything is a pure function of ``(seed, epoch)``, and ``start=k`` skips the first
``k`` batches of an epoch, for exact resumption.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from torch import Tensor

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from qkv.data.tokens.subword import SubwordTokenizer

__all__ = [
    "Example",
    "Seq2SeqBatch",
    "batches",
    "collate",
    "encode_pairs",
    "example_cost",
    "plan_batches",
    "plan_by_cost",
]

logger = logging.getLogger(__name__)

Example = tuple[list[int], list[int]]
"""``(source_ids, target_ids)`` without BOS/EOS."""


@dataclass(frozen=True)
class Seq2SeqBatch:
    """A padded batch of sentence pairs.

    Attributes:
        src: ``(B, S)`` long: source ids + [EOS], right-padded with ``PAD_ID``.
        src_lengths: ``(B,)`` long, true source lengths (EOS included, so >= 1).
        tgt_in: ``(B, T)`` long: [BOS] + target ids, right-padded with ``PAD_ID``.
        tgt_out: ``(B, T)`` long: target ids + [EOS], right-padded with ``PAD_ID``.
    """

    src: Tensor
    src_lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Seq2SeqBatch:
        """The same batch with every tensor moved to ``device``."""
        return Seq2SeqBatch(
            *(
                t.to(device, non_blocking=non_blocking)
                for t in (self.src, self.src_lengths, self.tgt_in, self.tgt_out)
            )
        )


def encode_pairs(
    pairs: Sequence[Pair],
    src_tok: SubwordTokenizer,
    tgt_tok: SubwordTokenizer,
    *,
    max_len: int | None = None,
    on_overflow: Literal["drop", "truncate", "error"] = "drop",
) -> list[Example]:
    """Encode sentence pairs into id examples.

    Args:
        pairs: ``(source, target)`` strings.
        src_tok, tgt_tok: tokenizers of each side (may be the same object).
        max_len: longest allowed side, in subword ids *before* EOS/BOS are added (so a batch's
            ``S`` and ``T`` are at most ``max_len + 1``). ``None`` keeps everything.
        on_overflow: what to do with a pair whose source or target exceeds ``max_len``:
            ``"drop"`` it (default; the number dropped is logged at INFO), ``"truncate"`` the
            long side(s) to ``max_len`` ids, or raise an ``"error"`` naming the pair.

    Returns:
        ``[(source_ids, target_ids), ...]`` in input order (minus dropped pairs).
    """
    if on_overflow not in ("drop", "truncate", "error"):
        raise DataError(f"on_overflow must be 'drop', 'truncate' or 'error', got {on_overflow!r}")
    if max_len is not None and max_len < 1:
        raise DataError(f"max_len must be >= 1 or None, got {max_len}")
    sources = src_tok.encode_batch([source for source, _ in pairs])
    targets = tgt_tok.encode_batch([target for _, target in pairs])
    if max_len is None:
        return list(zip(sources, targets, strict=True))
    examples: list[Example] = []
    n_long = 0
    for index, (src, tgt) in enumerate(zip(sources, targets, strict=True)):
        if len(src) <= max_len and len(tgt) <= max_len:
            examples.append((src, tgt))
            continue
        n_long += 1
        if on_overflow == "error":
            raise DataError(
                f"pair {index} is longer than max_len={max_len} ids (source {len(src)}, target "
                f"{len(tgt)}): {pairs[index][0][:60]!r}"
            )
        if on_overflow == "truncate":
            examples.append((src[:max_len], tgt[:max_len]))
    if n_long:
        action = "truncated" if on_overflow == "truncate" else "dropped"
        logger.info("%s %d of %d pairs longer than max_len=%d", action, n_long, len(pairs), max_len)
    return examples


def collate(examples: Sequence[Example]) -> Seq2SeqBatch:
    """Pad examples into a :class:`Seq2SeqBatch`.

    Shape:
        ``src`` ``(B, S)`` with ``S = 1 + longest source``; ``tgt_in``, ``tgt_out`` ``(B, T)`` with
        ``T = 1 + longest target``; ``src_lengths`` ``(B,)``.
    """
    if not examples:
        raise DataError("cannot collate an empty list of examples")
    size = len(examples)
    src_lengths = np.fromiter((len(s) + 1 for s, _ in examples), dtype=np.int64, count=size)
    tgt_lengths = np.fromiter((len(t) + 1 for _, t in examples), dtype=np.int64, count=size)
    src = np.full((size, int(src_lengths.max())), PAD_ID, dtype=np.int64)  # (B, S)
    tgt_in = np.full((size, int(tgt_lengths.max())), PAD_ID, dtype=np.int64)  # (B, T)
    tgt_out = np.full_like(tgt_in, PAD_ID)  # (B, T)
    for row, (source, target) in enumerate(examples):
        n, m = len(source), len(target)
        src[row, :n] = source
        src[row, n] = EOS_ID
        tgt_in[row, 0] = BOS_ID
        tgt_in[row, 1 : m + 1] = target
        tgt_out[row, :m] = target
        tgt_out[row, m] = EOS_ID
    return Seq2SeqBatch(
        src=torch.from_numpy(src),
        src_lengths=torch.from_numpy(src_lengths),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
    )


def example_cost(example: Example) -> int:
    """Padded tokens one example needs alone: ``max(len(source) + 1, len(target) + 1)``."""
    return max(len(example[0]), len(example[1])) + 1


def plan_batches(
    examples: Sequence[Example],
    *,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    pool_size: int = 4096,
) -> list[list[int]]:
    """The batches of one epoch as lists of example indices (see :func:`batches`)."""
    costs = np.fromiter((example_cost(ex) for ex in examples), dtype=np.int64, count=len(examples))
    src_len = np.fromiter((len(ex[0]) for ex in examples), dtype=np.int64, count=len(examples))
    return plan_by_cost(
        costs,
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        pool_size=pool_size,
        tiebreak=src_len,
    )


def plan_by_cost(
    costs: np.ndarray,
    *,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    pool_size: int = 4096,
    tiebreak: np.ndarray | None = None,
) -> list[list[int]]:
    """Length-grouped batches of item indices from each item's padded cost ``costs (N,)``
    (e.g. the length of one sequence), as :func:`batches` describes; ``tiebreak (N,)`` orders
    items of equal cost within a pool."""
    if max_tokens < 1:
        raise DataError(f"max_tokens must be >= 1, got {max_tokens}")
    if pool_size < 1:
        raise DataError(f"pool_size must be >= 1, got {pool_size}")
    if seed < 0 or epoch < 0:
        raise DataError(f"seed and epoch must be >= 0, got seed={seed}, epoch={epoch}")
    costs = np.asarray(costs, dtype=np.int64)
    if costs.size and int(costs.max()) > max_tokens:
        worst = int(costs.argmax())
        raise DataError(
            f"example {worst} needs {int(costs[worst])} padded tokens, more than "
            f"max_tokens={max_tokens}; raise max_tokens or drop long pairs with "
            "encode_pairs(max_len=...)"
        )
    if not shuffle:
        return _chunk(np.arange(len(costs)), costs, max_tokens)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(costs))
    plan: list[list[int]] = []
    for begin in range(0, len(order), pool_size):
        pool = order[begin : begin + pool_size]
        # Sort the pool by (cost, tiebreak); the stable sort keeps the random order of ties.
        keys = (costs[pool],) if tiebreak is None else (tiebreak[pool], costs[pool])
        pool = pool[np.lexsort(keys)]
        plan.extend(_chunk(pool, costs, max_tokens))
    return [plan[i] for i in rng.permutation(len(plan)).tolist()]


def _chunk(indices: np.ndarray, costs: np.ndarray, max_tokens: int) -> list[list[int]]:
    """Greedily cut ``indices`` into runs whose ``len(run) * max(cost)`` stays <= max_tokens."""
    runs: list[list[int]] = []
    run: list[int] = []
    longest = 0
    for index in indices.tolist():
        cost = int(costs[index])
        if run and (len(run) + 1) * max(longest, cost) > max_tokens:
            runs.append(run)
            run, longest = [], 0
        run.append(index)
        longest = max(longest, cost)
    if run:
        runs.append(run)
    return runs


def batches(
    examples: Sequence[Example],
    *,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
    pool_size: int = 4096,
) -> Iterator[Seq2SeqBatch]:
    """Yield the batches of one epoch, each at most ``max_tokens`` padded tokens per side.

    With ``shuffle=True`` the examples are permuted with ``numpy.random.default_rng([seed,
    epoch])``, cut into pools of ``pool_size``, each pool sorted by length and chunked greedily
    so that ``B * max(S, T) <= max_tokens``; the batch order is then permuted by the same
    generator. With ``shuffle=False`` the examples keep their order (outputs line up with the
    input, as translation of a test set needs) and are only chunked.

    Args:
        examples: ``(source_ids, target_ids)`` pairs, e.g. from :func:`encode_pairs`.
        max_tokens: padded-token budget of a batch, ``B * max(S, T) <= max_tokens``.
        shuffle: permute and length-group (training) or keep the input order (evaluation).
        seed, epoch: the permutation is a pure function of both (each >= 0).
        start: number of batches of this epoch to skip (already consumed before a restart).
        pool_size: examples sorted together. A batch never spans two pools, so keep it well
            above the examples per batch (default 4096); larger pools pad less but mix lengths
            less within an epoch.

    Every example appears in exactly one batch per epoch. The same ``(seed, epoch)`` gives the
    same batches; ``start=k`` yields exactly the batches after the first ``k``, so a run stopped
    after ``k`` batches resumes identically. ``len(plan_batches(...))`` is the epoch's length.

    Raises:
        DataError: an example alone exceeds ``max_tokens``, or a bad option value.
    """
    plan = plan_batches(
        examples,
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        pool_size=pool_size,
    )
    if not 0 <= start <= len(plan):
        raise DataError(f"start must be in [0, {len(plan)}] (batches in this epoch), got {start}")
    # Options are checked above, when batches() is called, not at the first next().
    return (collate([examples[i] for i in indices]) for indices in plan[start:])

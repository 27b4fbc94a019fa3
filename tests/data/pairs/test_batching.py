"""Batching: padding and BOS/EOS by hand, coverage, token budget, determinism, resumption."""

from __future__ import annotations

import logging

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    DataError,
    Seq2SeqBatch,
    batches,
    collate,
    encode_pairs,
    example_cost,
    plan_batches,
)


def test_collate_by_hand():
    batch = collate([([5, 6, 7], [8, 9]), ([10], [])])
    assert torch.equal(batch.src, torch.tensor([[5, 6, 7, EOS_ID], [10, EOS_ID, PAD_ID, PAD_ID]]))
    assert torch.equal(batch.src_lengths, torch.tensor([4, 2]))
    assert torch.equal(batch.tgt_in, torch.tensor([[BOS_ID, 8, 9], [BOS_ID, PAD_ID, PAD_ID]]))
    assert torch.equal(batch.tgt_out, torch.tensor([[8, 9, EOS_ID], [EOS_ID, PAD_ID, PAD_ID]]))
    for tensor in (batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out):
        assert tensor.dtype == torch.long
    assert collate([([], [4])]).src.tolist() == [[EOS_ID]]  # empty source still has length 1


def test_batch_is_frozen_and_moves():
    batch = collate([([5], [6])])
    with pytest.raises(AttributeError):
        batch.src = batch.tgt_in
    moved = batch.to("cpu")
    assert isinstance(moved, Seq2SeqBatch) and torch.equal(moved.tgt_out, batch.tgt_out)


def test_collate_rejects_empty():
    with pytest.raises(DataError, match="empty"):
        collate([])


def test_encode_pairs_drop_truncate_error(tokenizer, caplog):
    pairs = [
        ("The cat sat on the mat.", "Le chat"),
        ("Le chat", "Le chat était assis sur le tapis."),
    ]
    full = encode_pairs(pairs, tokenizer, tokenizer)
    assert full == [(tokenizer.encode(s), tokenizer.encode(t)) for s, t in pairs]
    limit = min(len(full[0][0]), len(full[1][1])) - 1
    with caplog.at_level(logging.INFO, logger="qkv.data.pairs.batching"):
        assert encode_pairs(pairs, tokenizer, tokenizer, max_len=limit) == []
    assert "dropped 2 of 2 pairs" in caplog.text
    cut = encode_pairs(pairs, tokenizer, tokenizer, max_len=limit, on_overflow="truncate")
    assert cut == [(s[:limit], t[:limit]) for s, t in full]
    with pytest.raises(DataError, match=f"pair 0 is longer than max_len={limit}"):
        encode_pairs(pairs, tokenizer, tokenizer, max_len=limit, on_overflow="error")
    assert encode_pairs(pairs, tokenizer, tokenizer, max_len=100) == full


def make_examples(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Distinct examples of varied, correlated lengths (as translations have): example i starts
    with id 4 + i."""
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(0, 30, (n,), generator=generator)
    target = (source + torch.randint(-3, 4, (n,), generator=generator)).clamp(min=0)
    return [
        ([4 + i] + [5] * a, [6] * b)
        for i, (a, b) in enumerate(zip(source.tolist(), target.tolist(), strict=True))
    ]


def recover(batch: Seq2SeqBatch) -> list[tuple[list[int], list[int]]]:
    """Undo collate: the examples a batch holds."""
    out = []
    for row in range(batch.src.shape[0]):
        n = int(batch.src_lengths[row]) - 1
        target = batch.tgt_out[row].tolist()
        out.append((batch.src[row, :n].tolist(), target[: target.index(EOS_ID)]))
    return out


EXAMPLES = make_examples(500)


def test_every_example_once_and_budget_respected():
    seen = []
    for batch in batches(EXAMPLES, max_tokens=300, seed=1, epoch=0, pool_size=128):
        assert batch.src.numel() <= 300 and batch.tgt_in.numel() <= 300
        assert batch.src.shape[0] == batch.tgt_in.shape[0] == batch.src_lengths.shape[0]
        seen.extend(recover(batch))
    assert sorted(seen) == sorted(EXAMPLES)


def test_same_seed_and_epoch_same_batches_other_epoch_other_order():
    plan = plan_batches(EXAMPLES, max_tokens=300, seed=1, epoch=0)
    assert plan == plan_batches(EXAMPLES, max_tokens=300, seed=1, epoch=0)
    assert plan != plan_batches(EXAMPLES, max_tokens=300, seed=1, epoch=1)
    assert plan != plan_batches(EXAMPLES, max_tokens=300, seed=2, epoch=0)
    first = [b.src for b in batches(EXAMPLES, max_tokens=300, seed=1, epoch=0)]
    again = [b.src for b in batches(EXAMPLES, max_tokens=300, seed=1, epoch=0)]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("k", [0, 1, 7])
def test_start_k_equals_dropping_first_k(k):
    every = list(batches(EXAMPLES, max_tokens=300, seed=3, epoch=2))
    resumed = list(batches(EXAMPLES, max_tokens=300, seed=3, epoch=2, start=k))
    assert len(resumed) == len(every) - k
    for a, b in zip(every[k:], resumed, strict=True):
        assert torch.equal(a.src, b.src) and torch.equal(a.tgt_out, b.tgt_out)


def test_start_past_the_end_raises_at_call():
    n = len(plan_batches(EXAMPLES, max_tokens=300))
    assert list(batches(EXAMPLES, max_tokens=300, start=n)) == []
    with pytest.raises(DataError, match=f"start must be in \\[0, {n}\\]"):
        batches(EXAMPLES, max_tokens=300, start=n + 1)  # raised before iteration


def padding_fraction(batch_iter) -> float:
    pad = total = 0
    for batch in batch_iter:
        pad += int((batch.src == PAD_ID).sum() + (batch.tgt_out == PAD_ID).sum())
        total += batch.src.numel() + batch.tgt_out.numel()
    return pad / total


def test_pools_group_similar_lengths():
    sorted_pools = padding_fraction(batches(EXAMPLES, max_tokens=300, seed=0, pool_size=500))
    input_order = padding_fraction(batches(EXAMPLES, max_tokens=300, shuffle=False))
    assert sorted_pools < 0.5 * input_order


def test_no_shuffle_keeps_input_order():
    seen = [
        ex for batch in batches(EXAMPLES, max_tokens=300, shuffle=False) for ex in recover(batch)
    ]
    assert seen == EXAMPLES


def test_example_over_budget_raises():
    with pytest.raises(DataError, match="example 1 needs 31 padded tokens"):
        plan_batches([([4], [5]), ([4] * 30, [5])], max_tokens=30)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=60),
    max_tokens=st.integers(13, 80),
    pool_size=st.integers(1, 70),
    seed=st.integers(0, 5),
    shuffle=st.booleans(),
)
def test_plan_partitions_examples_under_budget(lengths, max_tokens, pool_size, seed, shuffle):
    examples = [([4] * a, [5] * b) for a, b in lengths]
    plan = plan_batches(
        examples, max_tokens=max_tokens, shuffle=shuffle, seed=seed, pool_size=pool_size
    )
    assert sorted(i for run in plan for i in run) == list(range(len(examples)))
    for run in plan:
        assert run and len(run) * max(example_cost(examples[i]) for i in run) <= max_tokens

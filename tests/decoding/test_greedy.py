"""Greedy search on the scripted model: hand-computed outputs and scores, length limits,
finished rows leaving the batch, batch independence."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.decoding import greedy_search
from tests.decoding.scripted import (
    BOS,
    EOS,
    PAD,
    PADDING_ATTENTION,
    A,
    B,
    C,
    ScriptedModel,
    attention_row,
    random_table,
    source,
    table,
    tables,
)

TOL = 1e-6

# Greedy takes A (0.5) but every continuation of A is poor; B then EOS is the better output.
TRAP = table(
    {
        (): {A: 0.5, B: 0.4, EOS: 0.05},
        (A,): {C: 0.34, B: 0.33, EOS: 0.32},
        (A, C): {EOS: 0.9},
        (A, B): {EOS: 0.9},
        (B,): {EOS: 0.9},
    }
)


def one(next_probs, table_id: int = 7, length: int = 4):
    src, lengths = source([table_id], [length])
    return ScriptedModel(next_probs), src, lengths


def test_hand_computed_output_score_and_attention():
    model, src, lengths = one(TRAP)
    (hyp,) = greedy_search(model, src, lengths, max_len=10)
    assert hyp.tokens == [A, C]
    expected = math.log(0.5) + math.log(0.34) + math.log(0.9)
    assert hyp.log_prob == pytest.approx(expected, abs=TOL)
    assert hyp.score == hyp.log_prob
    # One attention row per generated token, EOS included, each from its own prefix.
    rows = [attention_row(prefix, 7, 4, 4) for prefix in ([], [A], [A, C])]
    assert torch.equal(hyp.attention, torch.tensor(rows))


def test_min_len_forbids_eos_without_renormalising():
    probs = table(
        {
            (): {EOS: 0.6, A: 0.3, B: 0.1},
            (A,): {EOS: 0.7, B: 0.2},
            (A, B): {EOS: 0.8},
        }
    )
    model, src, lengths = one(probs)
    assert greedy_search(model, src, lengths, max_len=5)[0].tokens == []
    (hyp,) = greedy_search(model, src, lengths, max_len=5, min_len=2)
    assert hyp.tokens == [A, B]
    # The model's own log-probabilities: log 0.3, not log(0.3 / 0.4).
    assert hyp.log_prob == pytest.approx(math.log(0.3 * 0.2 * 0.8), abs=TOL)


# EOS grows more likely; at step 3 (p = 0.05) it is the only way out when max_len = 3.
RISING_EOS = table(
    {
        (): {A: 0.98, EOS: 0.001},
        (A,): {A: 0.98, EOS: 0.01},
        (A, A): {A: 0.98, EOS: 0.015},
        (A, A, A): {A: 0.9, EOS: 0.05},
    }
)


@pytest.mark.parametrize(
    ("max_len", "tokens", "prob"),
    [
        (0, [], 0.001),
        (1, [A], 0.98 * 0.01),
        (3, [A, A, A], 0.98**3 * 0.05),  # forced EOS, scored with the model's p(EOS) = 0.05
        (4, [A, A, A, A], 0.98**3 * 0.9 * 0.9),  # unlisted prefix: EOS 0.9
    ],
)
def test_max_len_forces_eos_scored_by_the_model(max_len, tokens, prob):
    model, src, lengths = one(RISING_EOS)
    (hyp,) = greedy_search(model, src, lengths, max_len=max_len)
    assert hyp.tokens == tokens
    assert hyp.log_prob == pytest.approx(math.log(prob), abs=TOL)
    assert hyp.attention.shape == (len(tokens) + 1, 4)


def test_finished_rows_leave_the_batch_and_results_match_single_sentences():
    next_probs = tables(
        {
            10: table({(): {EOS: 0.8}}),  # ends at once
            11: RISING_EOS,  # runs to max_len = 3
            12: TRAP,  # two tokens
        }
    )
    src, lengths = source([10, 11, 12], [3, 5, 4])
    model = ScriptedModel(next_probs)
    batch = greedy_search(model, src, lengths, max_len=3)
    assert [h.tokens for h in batch] == [[], [A, A, A], [A, C]]
    single_rows = 0
    for b in range(3):
        single_model = ScriptedModel(next_probs)
        (single,) = greedy_search(
            single_model, src[b : b + 1, : int(lengths[b])], lengths[b : b + 1], max_len=3
        )
        single_rows += single_model.rows_stepped
        assert single.tokens == batch[b].tokens
        assert single.log_prob == batch[b].log_prob
        assert torch.equal(single.attention, batch[b].attention)
        assert batch[b].attention.shape == (len(batch[b].tokens) + 1, int(lengths[b]))
    # A finished sentence is not stepped again: the batch does the work of the single runs.
    assert model.rows_stepped == single_rows == 1 + 4 + 3


@pytest.mark.parametrize("seed", range(4))
def test_batch_of_n_equals_n_batches_of_one(seed):
    next_probs = random_table(seed)
    src, lengths = source([20, 21, 22, 23, 24], [3, 6, 4, 3, 5])
    batch = greedy_search(ScriptedModel(next_probs), src, lengths, max_len=6, min_len=1)
    for b, hyp in enumerate(batch):
        (single,) = greedy_search(
            ScriptedModel(next_probs), src[b : b + 1], lengths[b : b + 1], max_len=6, min_len=1
        )
        assert (single.tokens, single.log_prob) == (hyp.tokens, hyp.log_prob)
        assert torch.equal(single.attention, hyp.attention)
        assert (hyp.attention != PADDING_ATTENTION).all()
        assert 1 <= len(hyp.tokens) <= 6 and EOS not in hyp.tokens


def test_no_attention_and_float32_log_probs():
    src, lengths = source([7], [3])
    model = ScriptedModel(TRAP, with_attention=False, dtype=torch.float32)
    (hyp,) = greedy_search(model, src, lengths, max_len=10)
    assert hyp.attention is None
    assert hyp.tokens == [A, C]
    assert hyp.log_prob == pytest.approx(math.log(0.5 * 0.34 * 0.9), abs=TOL)


def test_custom_special_ids():
    # BOS fed as 1 is what the scripted model checks; a custom EOS id ends the sentence.
    probs = table({(): {A: 0.6, EOS: 0.3}, (A,): {B: 0.7, EOS: 0.2}})
    model, src, lengths = one(probs)
    (hyp,) = greedy_search(model, src, lengths, max_len=5, bos_id=BOS, eos_id=A)
    assert hyp.tokens == []
    assert hyp.log_prob == pytest.approx(math.log(0.6), abs=TOL)
    with pytest.raises(AssertionError, match="first token fed was 0"):
        greedy_search(model, src, lengths, max_len=5, bos_id=PAD)


def test_empty_batch_and_argument_errors():
    model = ScriptedModel(TRAP)
    empty = torch.empty((0, 3), dtype=torch.long)
    assert greedy_search(model, empty, torch.empty(0, dtype=torch.long), max_len=3) == []
    src, lengths = source([7], [3])
    with pytest.raises(ValueError, match=r"min_len=4, max_len=3"):
        greedy_search(model, src, lengths, max_len=3, min_len=4)
    with pytest.raises(ValueError, match=r"max_len=-1"):
        greedy_search(model, src, lengths, max_len=-1)
    with pytest.raises(ValueError, match=r"\(1,\).*got shape \(2,\)"):
        greedy_search(model, src, torch.tensor([3, 3]), max_len=3)
    with pytest.raises(ValueError, match=r"eos_id=9 .* vocabulary of 6"):
        greedy_search(model, src, lengths, max_len=3, eos_id=9)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(max_len=3.5), r"max_len must be an int, got 3\.5 \(a float\)"),
        (dict(max_len=True), r"max_len must be an int, got True \(a bool\)"),
        (dict(max_len=3, min_len=False), r"min_len must be an int, got False"),
        (dict(max_len=torch.tensor([True])), r"must hold ints, got a tensor of torch\.bool"),
    ],
)
def test_lengths_that_are_not_ints_are_a_type_error_naming_them(options, message):
    model = ScriptedModel(TRAP)
    src, lengths = source([7], [3])
    with pytest.raises(TypeError, match=message):
        greedy_search(model, src, lengths, **options)

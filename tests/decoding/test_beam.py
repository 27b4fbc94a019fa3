"""Beam search on the scripted model.

Hand-computed cases for each failure mode of public toolkits (RELIABILITY.md item 7), then
comparisons with two independent references on random tables: :func:`exhaustive` (every output;
a wide enough beam must find the true best ones) and :func:`reference_beam` (the documented
algorithm in plain Python, run to ``max_len`` without early stopping, one sentence at a time).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.decoding import Hypothesis, beam_search, greedy_search
from tests.decoding.scripted import (
    EOS,
    PAD,
    PADDING_ATTENTION,
    A,
    B,
    C,
    ScriptedModel,
    attention_row,
    exhaustive,
    log_prob_of,
    lp,
    random_table,
    reference_beam,
    repeats,
    source,
    table,
)
from tests.decoding.test_greedy import RISING_EOS, TRAP

TOL = 1e-6


def search(next_probs, *, table_id=7, length=4, model=None, **kwargs) -> list[Hypothesis]:
    src, lengths = source([table_id], [length])
    (hyps,) = beam_search(model or ScriptedModel(next_probs), src, lengths, **kwargs)
    return hyps


def summary(hyps: list[Hypothesis]) -> list[tuple[list[int], float]]:
    return [(h.tokens, round(h.log_prob, 9)) for h in hyps]


def test_beam_two_finds_the_sequence_greedy_misses():
    # Greedy: A (0.5), C (0.34), EOS (0.9) = 0.153. Beam 2 keeps B (0.4): B EOS = 0.36.
    src, lengths = source([7], [4])
    assert greedy_search(ScriptedModel(TRAP), src, lengths, max_len=10)[0].tokens == [A, C]
    (hyp,) = search(TRAP, beam_size=2, max_len=10, length_penalty=0.0)
    assert hyp.tokens == [B]
    assert hyp.log_prob == pytest.approx(math.log(0.4 * 0.9), abs=TOL)
    assert hyp.score == hyp.log_prob


# At step 0 the best candidate is EOS (0.5): a search that stops when its top hypothesis
# finishes returns []. With the length penalty, A B C (0.45 * 0.99^3, |Y| = 4) scores higher.
EARLY_EOS = table(
    {
        (): {EOS: 0.5, A: 0.45},
        (A,): {B: 0.99},
        (A, B): {C: 0.99},
        (A, B, C): {EOS: 0.99},
    }
)


def test_does_not_stop_when_the_top_hypothesis_finishes():  # joeynmt#148
    src, lengths = source([7], [4])
    assert greedy_search(ScriptedModel(EARLY_EOS), src, lengths, max_len=10)[0].tokens == []
    short = math.log(0.5) / lp(1, 0.6)
    long_log_prob = math.log(0.45) + 3 * math.log(0.99)
    long = long_log_prob / ((5 + 4) ** 0.6 / 6**0.6)
    assert long > short  # the hand computation the test relies on
    (hyp,) = search(EARLY_EOS, beam_size=2, max_len=10)  # default length_penalty = 0.6
    assert hyp.tokens == [A, B, C]
    assert hyp.score == pytest.approx(long, abs=TOL)
    assert hyp.log_prob == pytest.approx(long_log_prob, abs=TOL)


# Beam 2: [] finishes at step 0 (0.5) and [B] at step 1 (0.04 * 0.9); [A, B, C] (0.45 * 0.99^3)
# finishes at step 3 and, with the length penalty, scores best (as in EARLY_EOS).
PATIENT = table(
    {
        (): {EOS: 0.5, A: 0.45, B: 0.04},
        (A,): {B: 0.99},
        (A, B): {C: 0.99},
        (A, B, C): {EOS: 0.99},
    }
)


def test_patience_stops_once_enough_hypotheses_have_finished():  # Kasai et al. 2022
    (exact,) = search(PATIENT, beam_size=2, max_len=10)
    assert exact.tokens == [A, B, C]
    # patience 1: two finished hypotheses ([] and [B]) end the search; [] is the better.
    (patient,) = search(PATIENT, beam_size=2, max_len=10, patience=1.0)
    assert patient.tokens == []
    assert patient.log_prob == pytest.approx(math.log(0.5), abs=TOL)
    both = search(PATIENT, beam_size=2, max_len=10, patience=1, n_best=2)
    assert [h.tokens for h in both] == [[], [B]]
    for bad in (0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ValueError, match="patience must be a number > 0 or None"):
            search(PATIENT, beam_size=2, max_len=10, patience=bad)
    with pytest.raises(ValueError, match=r"fewer than n_best=3; pass patience >= 0\.75"):
        search(PATIENT, beam_size=4, max_len=10, patience=0.5, n_best=3)


# [A] = 0.6 * 0.5 = 0.3 (|Y| = 2) against [B, C, C, C] = 0.4 * 0.9^4 = 0.2624 (|Y| = 5).
PENALTY = table(
    {
        (): {A: 0.6, B: 0.38},
        (A,): {EOS: 0.5, C: 0.3},
        (B,): {C: 0.9},
        (B, C): {C: 0.9},
        (B, C, C): {C: 0.9},
        (B, C, C, C): {EOS: 0.9},
    }
)


@pytest.mark.parametrize(
    ("alpha", "tokens", "prob"), [(0.0, [A], 0.6 * 0.5), (1.0, [B, C, C, C], 0.38 * 0.9**4)]
)
def test_length_penalty_changes_the_winner(alpha, tokens, prob):
    (hyp,) = search(PENALTY, beam_size=2, max_len=6, length_penalty=alpha)
    assert hyp.tokens == tokens
    assert hyp.log_prob == pytest.approx(math.log(prob), abs=TOL)
    assert hyp.score == pytest.approx(
        math.log(prob) * (6 / (5 + len(tokens) + 1)) ** alpha, abs=TOL
    )


def test_negative_alpha_uses_the_bound_of_the_shortest_reachable_length():
    # alpha < 0 favours short outputs: lp decreases with |Y|, so a live hypothesis's best
    # possible score is at its shortest reachable length. [] (0.3) finishes at step 0; the live
    # [A] (0.5) then finishes with 0.495 and the better score log(0.495) * 7 / 6 > log(0.3).
    probs = table({(): {A: 0.5, EOS: 0.3}, (A,): {EOS: 0.99}})
    (hyp,) = search(probs, beam_size=2, max_len=10, length_penalty=-1.0)
    assert hyp.tokens == [A]
    assert hyp.score == pytest.approx(math.log(0.5 * 0.99) * 7 / 6, abs=TOL)


# Best outputs: [A] 0.3, [A, B] 0.216, [B, C] 0.189, then [B] 0.06, [] 0.05.
# The best candidate at step 1 is EOS ([A]); two more finish only at step 2.
N_BEST = table(
    {
        (): {A: 0.6, B: 0.3, EOS: 0.05, C: 0.03},
        (A,): {EOS: 0.5, B: 0.4},
        (B,): {EOS: 0.2, C: 0.7},
        (A, B): {EOS: 0.9},
        (B, C): {EOS: 0.9},
    }
)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_n_best_sorted_distinct_with_exact_scores(alpha):
    hyps = search(N_BEST, beam_size=3, n_best=3, max_len=5, length_penalty=alpha)
    expected = [([A], 0.6 * 0.5), ([A, B], 0.6 * 0.4 * 0.9), ([B, C], 0.3 * 0.7 * 0.9)]
    assert [h.tokens for h in hyps] == [tokens for tokens, _ in expected]
    for hyp, (tokens, prob) in zip(hyps, expected, strict=True):
        assert hyp.log_prob == pytest.approx(math.log(prob), abs=TOL)
        # The penalty of each hypothesis' own length, |Y| = len(tokens) + 1.
        penalty = (5 + len(tokens) + 1) ** alpha / 6**alpha
        assert hyp.score == pytest.approx(math.log(prob) / penalty, abs=TOL)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


# [] = 0.5 finishes at step 0; B EOS = 0.2 * 0.9 = 0.18 is second only if B stays in the beam
# after [] finishes (the beam is refilled to K live hypotheses); A C EOS = 0.3 * 0.8 * 0.5 = 0.12.
REFILL = table(
    {
        (): {EOS: 0.5, A: 0.3, B: 0.2},
        (A,): {EOS: 0.1, C: 0.8},
        (B,): {EOS: 0.9},
        (A, C): {EOS: 0.5},
    }
)


def test_finished_hypotheses_are_not_extended_and_the_beam_is_refilled():  # OpenNMT-py#137
    model = ScriptedModel(REFILL)  # asserts that it is never fed EOS
    hyps = search(REFILL, model=model, beam_size=2, n_best=2, max_len=8, length_penalty=0.0)
    assert summary(hyps) == [([], round(math.log(0.5), 9)), ([B], round(math.log(0.18), 9))]
    # The finished [] kept its own log-prob: nothing was added after its EOS.
    assert hyps[0].log_prob == pytest.approx(math.log(0.5), abs=TOL)
    assert hyps[0].attention.shape == (1, 4)


def test_max_len_finishes_live_hypotheses_with_the_models_eos():
    hyps = search(RISING_EOS, beam_size=2, n_best=2, max_len=3, length_penalty=0.0)
    # [A A A] + forced EOS (p = 0.05) beats [A A] + EOS (0.015); finalising "as is" would give
    # log 0.98^3 instead, and an unconstrained search [A A A A] (0.98^3 * 0.9 * 0.9).
    assert summary(hyps) == [
        ([A, A, A], round(math.log(0.98**3 * 0.05), 9)),
        ([A, A], round(math.log(0.98**2 * 0.015), 9)),
    ]
    assert all(h.attention.shape == (len(h.tokens) + 1, 4) for h in hyps)
    (longer,) = search(RISING_EOS, beam_size=2, max_len=4, length_penalty=0.0)
    assert longer.tokens == [A, A, A, A]


def test_min_len_forbids_early_eos():
    probs = table(
        {
            (): {EOS: 0.6, A: 0.3, B: 0.1},
            (A,): {EOS: 0.7, B: 0.2},
            (B,): {EOS: 0.5, A: 0.4},
            (A, B): {EOS: 0.8},
            (B, A): {EOS: 0.9},
        }
    )
    assert search(probs, beam_size=2, max_len=5)[0].tokens == []
    hyps = search(probs, beam_size=2, n_best=2, max_len=5, min_len=2, length_penalty=0.0)
    assert summary(hyps) == [
        ([A, B], round(math.log(0.3 * 0.2 * 0.8), 9)),
        ([B, A], round(math.log(0.1 * 0.4 * 0.9), 9)),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_beam_one_equals_greedy(seed):
    next_probs = random_table(seed)
    src, lengths = source([30, 31, 32], [3, 5, 4])
    for min_len in (0, 2):
        greedy = greedy_search(ScriptedModel(next_probs), src, lengths, max_len=7, min_len=min_len)
        beam = beam_search(
            ScriptedModel(next_probs),
            src,
            lengths,
            beam_size=1,
            max_len=7,
            min_len=min_len,
            length_penalty=0.0,
        )
        for g, (b,) in zip(greedy, beam, strict=True):
            assert b.tokens == g.tokens
            assert b.score == g.score == b.log_prob == g.log_prob
            assert torch.equal(b.attention, g.attention)


@pytest.mark.parametrize("seed", range(4))
def test_batch_of_n_equals_n_batches_of_one(seed):
    next_probs = random_table(seed)  # the table depends on the sentence's first source token
    table_ids, src_lengths = [40, 41, 42, 43], [3, 6, 4, 5]
    src, lengths = source(table_ids, src_lengths)
    kwargs = dict(beam_size=3, n_best=2, max_len=6, min_len=1, length_penalty=0.6)
    model = ScriptedModel(next_probs)
    batch = beam_search(model, src, lengths, **kwargs)
    single_rows = 0
    for b, hyps in enumerate(batch):
        single_model = ScriptedModel(next_probs)
        length = src_lengths[b]
        (single,) = beam_search(single_model, src[b : b + 1, :length], lengths[b : b + 1], **kwargs)
        single_rows += single_model.rows_stepped
        assert [(h.tokens, h.score, h.log_prob) for h in single] == [
            (h.tokens, h.score, h.log_prob) for h in hyps
        ]
        for s, h in zip(single, hyps, strict=True):
            assert torch.equal(s.attention, h.attention)
            assert h.attention.shape == (len(h.tokens) + 1, length)
    # Sentences that are done leave the batch: no more work than the single runs.
    assert model.rows_stepped == single_rows


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("search_fn", ["beam", "greedy"])
def test_per_sentence_max_len_equals_each_sentence_alone_with_its_limit(seed, search_fn):
    # A limit per sentence, so a sentence's output never depends on its batch-mates' lengths.
    next_probs = random_table(seed)
    table_ids, src_lengths, limits = [40, 41, 42, 43], [3, 6, 4, 5], [1, 5, 2, 7]
    src, lengths = source(table_ids, src_lengths)

    def run(src, lengths, max_len):
        model = ScriptedModel(next_probs)
        if search_fn == "greedy":
            return [[h] for h in greedy_search(model, src, lengths, max_len=max_len)]
        return beam_search(model, src, lengths, beam_size=3, n_best=2, max_len=max_len)

    batch = run(src, lengths, torch.tensor(limits))
    for b, hyps in enumerate(batch):
        (single,) = run(src[b : b + 1], lengths[b : b + 1], limits[b])
        assert [(h.tokens, h.score) for h in single] == [(h.tokens, h.score) for h in hyps]
        assert all(len(h.tokens) <= limits[b] for h in hyps)
    assert max(len(h.tokens) for hyps in batch for h in hyps) > min(limits)


def test_per_sentence_max_len_must_have_one_limit_per_sentence():
    src, lengths = source([40, 41], [3, 4])
    with pytest.raises(ValueError, match=r"one per sentence \(2,\), got shape \(3,\)"):
        beam_search(ScriptedModel(TRAP), src, lengths, beam_size=2, max_len=[3, 3, 3])
    with pytest.raises(ValueError, match=r"min_len=2, max_len=\[3, 1\]"):
        greedy_search(ScriptedModel(TRAP), src, lengths, max_len=[3, 1], min_len=2)


@pytest.mark.parametrize("seed", range(3))
def test_attention_rows_follow_each_hypothesis_through_reorders(seed):
    next_probs = random_table(seed, eos_growth=0.2)
    src, lengths = source([50, 51], [5, 3])
    batch = beam_search(
        ScriptedModel(next_probs), src, lengths, beam_size=4, n_best=4, max_len=8, min_len=2
    )
    for b, hyps in enumerate(batch):
        length = int(lengths[b])
        for h in hyps:
            rows = [
                attention_row(h.tokens[:i], 50 + b, 5, length)[:length]
                for i in range(len(h.tokens) + 1)
            ]
            assert torch.equal(h.attention, torch.tensor(rows))
            assert (h.attention != PADDING_ATTENTION).all()


def test_no_attention_and_float32_log_probs():
    model = ScriptedModel(N_BEST, with_attention=False, dtype=torch.float32)
    hyps = search(N_BEST, model=model, beam_size=3, n_best=3, max_len=5, length_penalty=0.0)
    assert [h.tokens for h in hyps] == [[A], [A, B], [B, C]]
    assert all(h.attention is None for h in hyps)
    assert hyps[2].log_prob == pytest.approx(math.log(0.3 * 0.7 * 0.9), abs=TOL)


ALPHAS = st.sampled_from([0.0, 0.6, 1.0, 2.0, -0.5])


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), alpha=ALPHAS, min_len=st.integers(0, 2))
def test_wide_beam_finds_the_exhaustive_best(seed, alpha, min_len):
    # max_len 3 over 5 non-EOS tokens: at most 6 * 5^2 = 150 candidates at a step, so a beam of
    # 150 never drops one, and must return the true n best of all outputs.
    next_probs = random_table(seed)
    hyps = search(
        next_probs,
        table_id=60,
        beam_size=150,
        n_best=8,
        max_len=3,
        min_len=min_len,
        length_penalty=alpha,
    )
    expected = exhaustive(next_probs, 60, max_len=3, min_len=min_len, alpha=alpha)[:8]
    assert [h.tokens for h in hyps] == [tokens for tokens, _, _ in expected]
    for h, (_, score, log_prob) in zip(hyps, expected, strict=True):
        assert h.score == pytest.approx(score, abs=TOL)
        assert h.log_prob == pytest.approx(log_prob, abs=TOL)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    beam_size=st.integers(1, 4),
    data=st.data(),
    alpha=ALPHAS,
    max_len=st.integers(0, 6),
)
def test_matches_the_reference_beam_run_to_max_len(seed, beam_size, data, alpha, max_len):
    n_best = data.draw(st.integers(1, beam_size))
    min_len = data.draw(st.integers(0, max_len))
    next_probs = random_table(seed)
    table_ids, src_lengths = [70, 71, 72], [4, 3, 5]
    src, lengths = source(table_ids, src_lengths)
    batch = beam_search(
        ScriptedModel(next_probs),
        src,
        lengths,
        beam_size=beam_size,
        n_best=n_best,
        max_len=max_len,
        min_len=min_len,
        length_penalty=alpha,
    )
    for table_id, hyps in zip(table_ids, batch, strict=True):
        expected = reference_beam(
            next_probs,
            table_id,
            beam_size=beam_size,
            max_len=max_len,
            min_len=min_len,
            alpha=alpha,
            n_best=n_best,
        )
        assert [h.tokens for h in hyps] == [tokens for tokens, _, _ in expected]
        for h, (_, score, log_prob) in zip(hyps, expected, strict=True):
            assert h.score == pytest.approx(score, abs=TOL)
            assert h.log_prob == pytest.approx(log_prob, abs=TOL)
            assert h.log_prob == pytest.approx(log_prob_of(next_probs, table_id, h.tokens), abs=TOL)
            assert min_len <= len(h.tokens) <= max_len and EOS not in h.tokens
        # Distinct, and n_best of them unless fewer outputs exist (max_len = 0: only []).
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps) == min(n_best, 1 + 5 * max_len)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), alpha=ALPHAS, n=st.integers(1, 2), min_len=st.integers(0, 2))
def test_no_repeat_ngram_wide_beam_finds_the_exhaustive_best(seed, alpha, n, min_len):
    # The exhaustive reference drops every output that holds an n-gram twice, in plain Python.
    next_probs = random_table(seed)
    hyps = search(
        next_probs,
        table_id=61,
        beam_size=150,
        n_best=8,
        max_len=3,
        min_len=min_len,
        length_penalty=alpha,
        no_repeat_ngram=n,
    )
    expected = exhaustive(next_probs, 61, max_len=3, min_len=min_len, alpha=alpha, no_repeat=n)[:8]
    assert [h.tokens for h in hyps] == [tokens for tokens, _, _ in expected]
    for h, (_, score, _) in zip(hyps, expected, strict=True):
        assert h.score == pytest.approx(score, abs=TOL)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    beam_size=st.integers(1, 4),
    n=st.integers(1, 3),
    max_len=st.integers(0, 7),
)
def test_no_repeat_ngram_matches_the_reference_beam(seed, beam_size, n, max_len):
    next_probs = random_table(seed, eos_growth=0.2)  # long outputs, where n-grams repeat
    table_ids, src_lengths = [73, 74], [4, 5]
    src, lengths = source(table_ids, src_lengths)
    batch = beam_search(
        ScriptedModel(next_probs), src, lengths, beam_size=beam_size, max_len=max_len,
        length_penalty=0.0, no_repeat_ngram=n,
    )  # fmt: skip
    greedy = greedy_search(ScriptedModel(next_probs), src, lengths, max_len=max_len,
                           no_repeat_ngram=n)  # fmt: skip
    for table_id, hyps, greedy_hyp in zip(table_ids, batch, greedy, strict=True):
        expected = reference_beam(
            next_probs, table_id, beam_size=beam_size, max_len=max_len, no_repeat=n
        )
        assert [h.tokens for h in hyps] == [tokens for tokens, _, _ in expected]
        for tokens in (hyps[0].tokens, greedy_hyp.tokens):
            grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
            assert len(grams) == len(set(grams))  # no n-gram twice
        (first,) = reference_beam(next_probs, table_id, beam_size=1, max_len=max_len, no_repeat=n)
        assert greedy_hyp.tokens == first[0]
        assert greedy_hyp.log_prob == pytest.approx(first[2], abs=TOL)


def test_repeated_ngram_tokens_by_hand():
    from qkv.decoding._common import repeated_ngram_tokens

    history = torch.tensor([[3, 4, 3, 5, 3], [1, 1, 1, 1, 1]])
    # Row 0 ends in 3: the bigrams that start with 3 are (3, 4) and (3, 5), so 4 and 5 are
    # blocked for n = 2; for n = 3 the last two tokens (5, 3) occurred nowhere before.
    assert repeated_ngram_tokens(history, 2, 8)[0].nonzero().flatten().tolist() == [4, 5]
    assert not repeated_ngram_tokens(history, 3, 8)[0].any()
    assert repeated_ngram_tokens(history, 1, 8)[0].nonzero().flatten().tolist() == [3, 4, 5]
    assert repeated_ngram_tokens(history, 3, 8)[1].nonzero().flatten().tolist() == [1]
    assert not repeated_ngram_tokens(history[:, :1], 2, 8).any()  # nothing to repeat yet
    assert repeats([3, 4, 3], 4, 2) and not repeats([3, 4, 3], 5, 2)  # the reference agrees


def test_no_repeat_ngram_is_refused_unless_an_int_of_at_least_zero():
    src, lengths = source([7], [4])
    for bad in (-1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="no_repeat_ngram"):
            beam_search(ScriptedModel(TRAP), src, lengths, beam_size=2, max_len=4,
                        no_repeat_ngram=bad)  # fmt: skip
        with pytest.raises(ValueError, match="no_repeat_ngram"):
            greedy_search(ScriptedModel(TRAP), src, lengths, max_len=4, no_repeat_ngram=bad)


def test_hypothesis_is_frozen():
    hyp = Hypothesis(tokens=[A], score=-1.0, log_prob=-1.0)
    with pytest.raises(AttributeError):
        hyp.score = 0.0  # type: ignore[misc]
    assert hyp.attention is None


def test_empty_batch_and_argument_errors():
    model = ScriptedModel(TRAP)
    empty = torch.empty((0, 3), dtype=torch.long)
    assert beam_search(model, empty, torch.empty(0, dtype=torch.long), beam_size=2, max_len=3) == []
    src, lengths = source([7], [3])
    with pytest.raises(ValueError, match=r"n_best=3, beam_size=2"):
        beam_search(model, src, lengths, beam_size=2, n_best=3, max_len=5)
    with pytest.raises(ValueError, match=r"n_best=0"):
        beam_search(model, src, lengths, beam_size=2, n_best=0, max_len=5)
    with pytest.raises(ValueError, match=r"beam_size must be between 1 and 1000, got 0"):
        beam_search(model, src, lengths, beam_size=0, max_len=5)
    with pytest.raises(ValueError, match=r"min_len=6, max_len=5"):
        beam_search(model, src, lengths, beam_size=2, max_len=5, min_len=6)
    with pytest.raises(ValueError, match=r"length_penalty must be finite, got nan"):
        beam_search(model, src, lengths, beam_size=2, max_len=5, length_penalty=math.nan)
    with pytest.raises(ValueError, match=r"got shape \(3,\)"):
        beam_search(model, src[0], lengths, beam_size=2, max_len=5)
    assert PAD == 0  # empty beam slots are fed pad_id; the model never sees EOS


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (dict(beam_size=2.5), TypeError, r"beam_size must be an int, got 2\.5 \(a float\)"),
        (dict(beam_size=True), TypeError, r"beam_size must be an int, got True \(a bool\)"),
        (dict(beam_size=100_000), ValueError, r"beam_size must be between 1 and 1000, got 100000"),
        (dict(beam_size=2, max_len=5.0), TypeError, r"max_len must be an int, got 5\.0"),
        (dict(beam_size=2, max_len=True), TypeError, r"max_len must be an int, got True"),
        (dict(beam_size=2, min_len=1.5), TypeError, r"min_len must be an int, got 1\.5"),
        (dict(beam_size=2, max_len=[5.5]), TypeError, r"max_len\[0\] must be an int, got 5\.5"),
        (dict(beam_size=2, max_len=torch.tensor([5.0])), TypeError, r"tensor of torch\.float32"),
        (dict(beam_size=2, n_best=1.0), TypeError, r"n_best must be an int, got 1\.0"),
    ],
)
def test_sizes_that_are_not_ints_or_too_wide_are_refused_by_name(options, error, message):
    """A float beam was a TypeError from deep inside torch; ``True`` was silently a beam of 1;
    a beam of 100,000 allocated for half a minute before it crashed (:mod:`qkv.decoding.sizes`)."""
    model = ScriptedModel(TRAP)
    src, lengths = source([7], [3])
    with pytest.raises(error, match=message):
        beam_search(model, src, lengths, **{"max_len": 5, **options})

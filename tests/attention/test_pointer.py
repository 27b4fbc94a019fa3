"""Attention as a pointer: occurrences and the attention sum (Kadlec et al. 2016) against
hand-computed values and a masked softmax; the best span (DrQA) against brute force."""

from __future__ import annotations

import itertools

import pytest
import torch

from qkv.attention.core import masked_softmax
from qkv.attention.pointer import best_span, masked_log_softmax, occurrences, pointer_sum

pytestmark = pytest.mark.usefixtures("one_thread")


def test_occurrences_and_the_attention_sum_by_hand():
    passage = torch.tensor([[5, 7, 5, 9, 0], [3, 3, 3, 4, 4]])
    keep = torch.tensor([[True, True, True, True, False], [True, True, True, True, True]])
    candidates = torch.tensor([[5, 9, 0], [4, 3, 8]])  # 0 is the pad id: only at padding
    occurs = occurrences(passage, keep, candidates)
    assert occurs.shape == (2, 3, 5)
    assert occurs[0].tolist() == [
        [True, False, True, False, False],
        [False, False, False, True, False],
        [False, False, False, False, False],  # the padded 0 is not an occurrence
    ]
    assert occurs[1, 0].tolist() == [False, False, False, True, True]
    assert not occurs[1, 2].any()
    weights = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.05, 0.15, 0.2, 0.25, 0.35]])
    mass = pointer_sum(weights, occurs)
    expected = torch.tensor([[0.1 + 0.3, 0.4, 0.0], [0.25 + 0.35, 0.05 + 0.15 + 0.2, 0.0]])
    torch.testing.assert_close(mass, expected)


def test_the_attention_sum_equals_the_sum_of_a_masked_softmax():
    gen = torch.Generator().manual_seed(0)
    b, s, c, v = 4, 9, 5, 6
    passage = torch.randint(1, v, (b, s), generator=gen)
    keep = torch.arange(s)[None, :] < torch.tensor([9, 4, 1, 7])[:, None]
    candidates = torch.randint(1, v, (b, c), generator=gen)
    energies = torch.randn(b, s, generator=gen, dtype=torch.float64)
    weights = masked_softmax(energies, keep)
    mass = pointer_sum(weights, occurrences(passage, keep, candidates))
    for row, col in itertools.product(range(b), range(c)):
        at = [i for i in range(s) if keep[row, i] and passage[row, i] == candidates[row, col]]
        expected = energies[row, at].exp().sum() / energies[row, keep[row]].exp().sum()
        torch.testing.assert_close(mass[row, col], expected)
    # Every kept word is some candidate: the masses of the distinct words sum to one.
    words = torch.arange(1, v).expand(b, -1)
    torch.testing.assert_close(
        pointer_sum(weights, occurrences(passage, keep, words)).sum(-1),
        torch.ones(b, dtype=torch.float64),
    )


def test_the_attention_sum_passes_gradients_to_the_attended_positions_only():
    passage = torch.tensor([[1, 2, 1, 3]])
    keep = torch.ones(1, 4, dtype=torch.bool)
    occurs = occurrences(passage, keep, torch.tensor([[1, 3]]))
    energies = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(
        lambda e: pointer_sum(masked_softmax(e, keep), occurs), (energies,), eps=1e-6
    )
    weights = torch.full((1, 4), 0.25, requires_grad=True)
    pointer_sum(weights, occurs)[0, 0].backward()
    assert weights.grad.tolist() == [[1.0, 0.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: occurrences(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool),
                             torch.zeros(2, 1, dtype=torch.long)), "passage must be a .* integer"),
        (lambda: occurrences(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3),
                             torch.zeros(2, 1, dtype=torch.long)), "passage_keep must be a bool"),
        (lambda: occurrences(torch.zeros(2, 3, dtype=torch.long),
                             torch.ones(2, 3, dtype=torch.bool),
                             torch.zeros(3, 1, dtype=torch.long)), r"differ in batch size"),
        (lambda: pointer_sum(torch.ones(2, 4), torch.ones(2, 1, 3, dtype=torch.bool)),
         r"weights \(2, 4\) must be \(B, S\) = \(2, 3\)"),
        (lambda: pointer_sum(torch.ones(2, 3), torch.ones(2, 1, 3)), "occurs must be a .* boolean"),
    ],
)  # fmt: skip
def test_bad_inputs_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def brute_force_span(start, end, keep, max_length):
    best = None
    s = start.size(0)
    for i, j in itertools.product(range(s), range(s)):
        if keep[i] and keep[j] and i <= j < i + max_length:
            score = start[i] + end[j]
            if best is None or score > best[2]:
                best = (i, j, score)
    return best


@pytest.mark.parametrize("max_length", [1, 2, 3, 15])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_best_span_equals_brute_force(max_length, dtype):
    gen = torch.Generator().manual_seed(max_length)
    for trial in range(20):
        b, s = 3, int(torch.randint(1, 12, (1,), generator=gen))
        lengths = torch.randint(1, s + 1, (b,), generator=gen)
        keep = torch.arange(s)[None, :] < lengths[:, None]  # (B, S) right padding
        if trial % 4 == 3:  # holes: a pointer may also skip positions inside the passage
            keep &= torch.rand(b, s, generator=gen) < 0.7
            keep[:, 0] = True
        start = torch.randn(b, s, generator=gen, dtype=dtype).log_softmax(-1)
        end = torch.randn(b, s, generator=gen, dtype=dtype).log_softmax(-1)
        first, last, score = best_span(start, end, keep, max_length)
        assert first.dtype == last.dtype == torch.long and score.dtype == dtype
        for row in range(b):
            i, j, expected = brute_force_span(start[row], end[row], keep[row], max_length)
            assert (first[row].item(), last[row].item()) == (i, j), (trial, row)
            torch.testing.assert_close(score[row], expected)


def test_the_best_span_ignores_huge_scores_at_padding_and_beyond_the_length():
    start = torch.tensor([[0.0, -1.0, -2.0, 50.0]])
    end = torch.tensor([[-5.0, -1.0, 40.0, 90.0]])
    keep = torch.tensor([[True, True, True, False]])
    first, last, score = best_span(start, end, keep, max_length=2)
    assert (first.item(), last.item(), score.item()) == (1, 2, 39.0)
    first, last, _ = best_span(start, end, keep, max_length=1)
    assert (first.item(), last.item()) == (2, 2)


def test_the_best_span_names_an_empty_row_and_bad_arguments():
    keep = torch.tensor([[True, False], [False, False]])
    with pytest.raises(ValueError, match=r"no kept position to point at in batch row\(s\) \[1\]"):
        best_span(torch.zeros(2, 2), torch.zeros(2, 2), keep, 3)
    with pytest.raises(ValueError, match="max_length must be a positive int, got 0"):
        best_span(torch.zeros(2, 2), torch.zeros(2, 2), keep, 0)
    with pytest.raises(ValueError, match=r"end_log_probs \(2, 3\) must both be \(B, S\)"):
        best_span(torch.zeros(2, 2), torch.zeros(2, 3), keep, 3)
    with pytest.raises(ValueError, match=r"keep \(2, 1\) must have the shape"):
        best_span(torch.zeros(2, 2), torch.zeros(2, 2), keep[:, :1], 3)


def test_the_masked_log_softmax_is_the_log_of_the_masked_softmax_and_finite():
    gen = torch.Generator().manual_seed(1)
    energies = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 0, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    log_probs = masked_log_softmax(energies, keep)
    assert torch.isfinite(log_probs).all()
    probs = log_probs.exp() * keep
    torch.testing.assert_close(probs, masked_softmax(energies, keep))
    assert (log_probs[~keep] == torch.finfo(torch.float64).min).all()
    half = masked_log_softmax(energies.half(), keep)
    assert half.dtype == torch.float32 and torch.isfinite(half).all()

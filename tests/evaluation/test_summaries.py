"""Summary metrics: ROUGE equals hand-computed values and an independent n-gram/LCS count, and
ROUGE-Lsum reads the sentences as rouge-score does when they are given one a line; repetition
and distinct-n on hand cases and their invariants; bad inputs are refused."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qkv.evaluation.summaries import (
    distinct_n,
    repeated_ngram_share,
    repeated_ngram_starts,
    rouge_scores,
    split_sentences,
)

rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")


def f1(overlap: int, n_hyp: int, n_ref: int) -> float:
    return 2 * overlap / (n_hyp + n_ref) if n_hyp + n_ref else 0.0


def test_rouge_on_hand_computed_pairs():
    hypotheses = ["the cats sat on the mat", "the gunman killed police", "the quick, brown dog!"]
    references = [
        "the cat was sitting on the mat",
        "police killed the gunman",
        "The quick brown fox.",
    ]
    # 1. Stemmed: cats -> cat, sitting -> sit; "sat" (3 letters) is not stemmed, so it never
    #    matches "sit". Hypothesis: the cat sat on the mat (6); reference: the cat was sit on
    #    the mat (7). Unigrams in common: the x2, cat, on, mat = 5 -> F1 = 2*5/(6+7) = 10/13
    #    (8/13 without the stemmer). Bigrams 5 and 6, common: the-cat, on-the, the-mat = 3 ->
    #    6/11. LCS: the cat on the mat = 5 -> 10/13.
    # 2. polic kill the gunman against the gunman kill polic: every unigram (1), one bigram
    #    of three (the-gunman: 1/3), LCS "the gunman" = 2 of 4 -> 1/2.
    # 3. Case and punctuation are dropped: the quick brown dog / the quick brown fox:
    #    3 of 4 unigrams (3/4), 2 of 3 bigrams (2/3), LCS 3 (3/4).
    expected = {
        "rouge1": (10 / 13 + 1 + 3 / 4) / 3 * 100,
        "rouge2": (6 / 11 + 1 / 3 + 2 / 3) / 3 * 100,
        "rougeL": (10 / 13 + 1 / 2 + 3 / 4) / 3 * 100,
    }
    expected["rougeLsum"] = expected["rougeL"]  # one sentence a text: summary-level = LCS
    assert rouge_scores(hypotheses, references) == pytest.approx(expected, abs=1e-9)
    assert rouge_scores(hypotheses[:1], references[:1])["rouge1"] == pytest.approx(1000 / 13)


def test_identical_texts_score_100_and_an_empty_hypothesis_0():
    text = "Attention is all you need. It says so."
    kinds = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    assert rouge_scores([text], [text]) == pytest.approx(dict.fromkeys(kinds, 100.0))
    assert rouge_scores([""], [text]) == dict.fromkeys(kinds, 0.0)


def test_sentences_are_split_one_a_line():
    assert split_sentences('The cat sat. The dog ran!  "Why?" he asked.\nA (b c.) d') == [
        "The cat sat.", "The dog ran!", '"Why?"', "he asked.", "A (b c.)", "d",
    ]  # fmt: skip
    assert split_sentences("no end\n\n  \n") == ["no end"]
    assert split_sentences("3.5 points") == ["3.5 points"]  # no space after the dot


def test_rouge_lsum_reads_the_split_sentences_as_rouge_score_does():
    hypothesis, reference = "The dog ran. The cat sat.", "The cat sat. The dog ran."
    ours = rouge_scores([hypothesis], [reference])
    scorer = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=True)
    split = scorer.score("The cat sat.\nThe dog ran.", "The dog ran.\nThe cat sat.")
    unsplit = scorer.score(reference, hypothesis)
    assert ours["rougeLsum"] == pytest.approx(100 * split["rougeLsum"].fmeasure)
    # By hand: each reference sentence is a whole hypothesis sentence -> 100; as one
    # sentence the LCS is 3 of 6 tokens (the cat sat, or the dog ran) -> 50.
    assert ours["rougeLsum"] == pytest.approx(100.0)
    assert 100 * unsplit["rougeLsum"].fmeasure == pytest.approx(50.0)
    assert ours["rougeL"] == pytest.approx(50.0)  # ROUGE-L ignores the sentences


def reference_rouge(hyp: list[str], ref: list[str]) -> tuple[float, float, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 counted directly (tokens short enough not to stem)."""

    def grams(tokens: list[str], n: int) -> Counter:
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    scores = []
    for n in (1, 2):
        h, r = grams(hyp, n), grams(ref, n)
        scores.append(f1(sum((h & r).values()), sum(h.values()), sum(r.values())))
    table = [[0] * (len(ref) + 1) for _ in range(len(hyp) + 1)]
    for i, a in enumerate(hyp):
        for j, b in enumerate(ref):
            table[i + 1][j + 1] = (
                table[i][j] + 1 if a == b else max(table[i][j + 1], table[i + 1][j])
            )
    scores.append(f1(table[-1][-1], len(hyp), len(ref)))
    return scores[0], scores[1], scores[2]


words = st.lists(st.sampled_from(["a", "b", "cat", "the", "sat", "on"]), max_size=12)


@given(st.lists(st.tuples(words, words), min_size=1, max_size=4))
def test_rouge_equals_a_direct_count(pairs):
    hypotheses = [" ".join(h) for h, _ in pairs]
    references = [" ".join(r) for _, r in pairs]
    expected = [reference_rouge(h, r) for h, r in pairs]
    got = rouge_scores(hypotheses, references)
    for index, kind in enumerate(["rouge1", "rouge2", "rougeL"]):
        mean = 100 * sum(e[index] for e in expected) / len(pairs)
        assert got[kind] == pytest.approx(mean, abs=1e-9)


def test_repeated_ngram_starts_on_hand_cases():
    assert repeated_ngram_starts(["a", "b", "a", "b", "a"], n=2) == [2, 3]  # ab ba [ab ba]
    assert repeated_ngram_starts(["x"] * 6, n=3) == [1, 2, 3]
    assert repeated_ngram_starts(["a", "b", "c"], n=1) == []
    assert repeated_ngram_starts(["a", "b"], n=3) == []


def test_repeated_ngram_share_on_hand_cases():
    assert repeated_ngram_share([["a", "b", "a", "b", "a"]], n=2) == 0.5  # ab ba [ab ba]
    assert repeated_ngram_share([["a", "b", "c", "d"]], n=1) == 0.0
    assert repeated_ngram_share([["x"] * 6], n=3) == pytest.approx(3 / 4)  # (L - n)/(L - n + 1)
    # Pooled, and only within an output: abc abc -> abc bca cab [abc] (1 of 4); the second
    # output repeats the first's n-gram, which is no repeat.
    outputs = [["a", "b", "c", "a", "b", "c"], ["a", "b", "c"]]
    assert repeated_ngram_share(outputs, n=3) == pytest.approx(1 / 5)
    assert repeated_ngram_share([["a", "b"], []], n=3) == 0.0  # no trigram at all


def test_distinct_n_on_hand_cases():
    outputs = [["a", "b", "a"], ["a", "b"]]
    assert distinct_n(outputs, 1) == pytest.approx(2 / 5)  # a b over a b a a b
    assert distinct_n(outputs, 2) == pytest.approx(2 / 3)  # ab ba over ab ba ab
    assert distinct_n(outputs, 3) == 1.0  # the one trigram aba
    assert distinct_n(outputs, 4) == 0.0  # none
    assert distinct_n([["to", "be", "or", "not", "to", "be"]], 2) == pytest.approx(4 / 5)


@given(st.lists(st.sampled_from("abc"), max_size=15), st.integers(1, 4))
def test_one_output_repeats_what_is_not_distinct(tokens, n):
    """Within one output every n-gram is distinct or a repeat of an earlier one."""
    if len(tokens) >= n:
        assert repeated_ngram_share([tokens], n) == pytest.approx(1 - distinct_n([tokens], n))


@given(st.lists(st.lists(st.sampled_from("ab"), max_size=8), min_size=1, max_size=4))
def test_repeats_within_outputs_are_at_most_the_duplicates_across_them(outputs):
    if any(len(o) >= 2 for o in outputs):
        assert repeated_ngram_share(outputs, 2) <= 1 - distinct_n(outputs, 2) + 1e-12


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rouge_scores(["a", "b"], ["a"]), "2 hypotheses but 1 references"),
        (lambda: rouge_scores([], []), "no hypotheses to score"),
        (lambda: rouge_scores("a cat", "a dog"), "hypotheses is one string"),
        (lambda: rouge_scores(["a"], [None]), r"references\[0\] is a NoneType"),
        (lambda: repeated_ngram_share([["a"]], n=0), "n must be a whole number >= 1"),
        (lambda: distinct_n([["a"]], 1.5), "got 1.5"),
        (lambda: distinct_n([], 1), "no outputs"),
        (lambda: distinct_n(["the cat sat"], 1), r"outputs\[0\] is a string"),
        (lambda: repeated_ngram_share("abc"), "outputs is one string"),
    ],
)
def test_bad_inputs_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()

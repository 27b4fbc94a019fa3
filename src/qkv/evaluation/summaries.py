"""Metrics for generated summaries and replies: ROUGE, and how much an output repeats itself or
the outputs repeat one another.

- :func:`rouge_scores`: ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum F1 (Lin 2004, "ROUGE: A Package
  for Automatic Evaluation of Summaries"), computed by Google's ``rouge-score`` package (a
  Python reimplementation of Lin's Perl script) with its Porter stemmer, averaged over the
  pairs and times 100. ROUGE-Lsum is the summary-level LCS of Lin's section 3.2 (the union of
  each reference sentence's LCS with every hypothesis sentence). ``rouge-score`` reads a
  text's sentences from its lines (its ``split_summaries=True`` would find them with NLTK's
  punkt model, which is not available offline), so :func:`split_sentences` puts one sentence
  a line first; a one-line text would be one sentence, and its ROUGE-Lsum its ROUGE-L.
- :func:`repeated_ngram_share`: See et al. 2017 ("Get To The Point", Figure 4), the share of
  an output's n-grams that repeat an n-gram earlier in that output.
- :func:`distinct_n`: Li et al. 2016 ("A Diversity-Promoting Objective Function for Neural
  Conversation Models"), distinct n-grams over all n-grams of the outputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = ["distinct_n", "repeated_ngram_share", "rouge_scores", "split_sentences"]

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# A sentence ends with ".", "!" or "?" (a closing quote or bracket may follow) then whitespace.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``: its lines, each cut after ``.``, ``!`` or ``?`` (and a
    closing quote or bracket) followed by whitespace; empty pieces dropped.

    It cuts after abbreviations too (``"e.g. this"``); that changes ROUGE-Lsum only. Pass
    texts with one sentence a line and no such marks inside to decide the sentences yourself.
    """
    return [
        piece
        for line in text.split("\n")
        for piece in (p.strip() for p in _SENTENCE_END.split(line))
        if piece
    ]


def _check_texts(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str):
            raise ValueError(f"{name} is one string ({texts[:40]!r}); pass a list of texts")
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise ValueError(
                f"{name}[{bad}] is a {type(texts[bad]).__name__}, not a string; pass the text"
            )
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up"
        )
    if not hypotheses:
        raise ValueError("no hypotheses to score; pass at least one (hypothesis, reference) pair")


def rouge_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """``{"rouge1": ..., "rouge2": ..., "rougeL": ..., "rougeLsum": ...}``: each the F1 of
    ``rouge-score``'s ``RougeScorer(..., use_stemmer=True)`` averaged over the pairs, times 100.

    Tokens are ``rouge-score``'s: lower-cased runs of ``a-z0-9`` (other characters, accented
    letters included, separate them), words of more than three letters Porter-stemmed
    (``cats`` -> ``cat``; ``sat`` stays, so ``sitting`` and ``sat`` never match). Each text is
    passed with :func:`split_sentences`' sentences one a line, which only ROUGE-Lsum reads. A
    pair with an empty side scores 0.

    Raises:
        ValueError: the two lists differ in length or are empty, a list is a bare string, or an
            item is not a string (all named).
        ImportError: ``rouge-score`` is not installed (the message gives the pip command).
    """
    _check_texts(hypotheses, references)
    try:
        from rouge_score import rouge_scorer
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "rouge_scores needs the `rouge-score` package: pip install 'rouge-score>=0.1.2' "
            "(or pip install 'qkv[text]')"
        ) from err
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        # RougeScorer.score takes the reference (target) first.
        scores = scorer.score(
            "\n".join(split_sentences(reference)), "\n".join(split_sentences(hypothesis))
        )
        for kind in ROUGE_TYPES:
            totals[kind] += scores[kind].fmeasure
    return {kind: 100.0 * total / len(hypotheses) for kind, total in totals.items()}


def _check_outputs(outputs: Sequence[Sequence[str]], n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number >= 1 (the n-gram length), got {n!r}")
    if isinstance(outputs, str):
        raise ValueError(f"outputs is one string ({outputs[:40]!r}); pass a list of token lists")
    if len(outputs) == 0:
        raise ValueError("no outputs; pass at least one token list")
    for i, output in enumerate(outputs):
        if isinstance(output, str):
            raise ValueError(
                f"outputs[{i}] is a string ({output[:40]!r}), not a token list; pass its tokens "
                "(text.split(), or the tokenizer's)"
            )


def _ngrams(tokens: Sequence[str], n: int) -> Iterator[tuple[str, ...]]:
    return (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def repeated_ngram_share(outputs: Sequence[Sequence[str]], n: int = 3) -> float:
    """See et al. 2017's repetition: of all n-grams of the outputs (an output of ``L`` tokens
    has ``max(L - n + 1, 0)``, n-grams never span two outputs), the share that equal an n-gram
    starting earlier in the same output.

    ``["a", "b", "a", "b", "a"]`` with ``n=2``: n-grams ``ab ba ab ba``, the last two repeat:
    0.5. An n-gram's first occurrence is never a repeat, so an output of distinct n-grams
    scores 0 and one token said ``L`` times scores ``(L - n) / (L - n + 1)``. The share is
    pooled over the outputs (longer outputs weigh more); 0.0 when they hold no n-gram at all.

    Raises:
        ValueError: ``n`` < 1, no outputs, or an output given as a string instead of tokens.
    """
    _check_outputs(outputs, n)
    total = sum(max(len(output) - n + 1, 0) for output in outputs)
    repeats = sum(len(repeated_ngram_starts(output, n)) for output in outputs)
    return repeats / total if total else 0.0


def repeated_ngram_starts(output: Sequence[str], n: int = 3) -> list[int]:
    """Where ``output`` repeats itself: the start of each n-gram equal to one starting earlier
    in it (the repeats :func:`repeated_ngram_share` counts). ``["a", "b", "a", "b", "a"]``
    with ``n=2``: ``[2, 3]``."""
    _check_outputs([output], n)
    seen: set[tuple[str, ...]] = set()
    starts = []
    for i, gram in enumerate(_ngrams(output, n)):
        if gram in seen:
            starts.append(i)
        seen.add(gram)
    return starts


def distinct_n(outputs: Sequence[Sequence[str]], n: int) -> float:
    """Li et al. 2016's distinct-n: the number of distinct n-grams over the number of n-grams,
    counted across all the outputs (n-grams never span two outputs); 0.0 when the outputs
    hold no n-gram at all.

    ``[["a", "b", "a"], ["a", "b"]]``: distinct-1 = 2/5 and distinct-2 = 2/3 (``ab ba`` and
    ``ab``). Li et al. wrote that they divided by the number of generated tokens; that is the
    same for n = 1, and for n > 1 the number of n-grams is the denominator most code uses
    (so that one output without repetition scores 1).

    Raises:
        ValueError: ``n`` < 1, no outputs, or an output given as a string instead of tokens.
    """
    _check_outputs(outputs, n)
    grams = [gram for output in outputs for gram in _ngrams(output, n)]
    return len(set(grams)) / len(grams) if grams else 0.0

"""qkv's decoding rules on a ``ctranslate2.Translator``, so that an exported translation model
gives the outputs qkv's :class:`~qkv.tasks.translation.runner.Translator` gives
(:func:`translate_tokens`; :mod:`qkv.ctranslate2.engine` wraps it with the tokenizers).

* **Lengths.** qkv gives each sentence its own limit, ``max_len = a * S + b`` for a source of
  ``S`` tokens (EOS included), and forces EOS after ``max_len`` tokens; CTranslate2 has one
  ``max_decoding_length`` per call. Sentences are therefore decoded in groups of equal limit,
  and a hypothesis that reaches the limit without EOS ends there, as qkv's forced EOS ends it.
* **Greedy search** (``beam_size=1``) is then the same search: the same tokens.
* **Beam search.** Both searches keep the ``K`` best continuations that do not end and finish
  the ending ones, but they rank finished hypotheses differently: qkv by the GNMT score
  ``log P / ((5 + |Y|) / 6)^alpha`` (Wu et al. 2016, eq. 14, ``|Y|`` counting the EOS), and
  CTranslate2 by ``log P / |Y|^alpha``. So CTranslate2 returns its ``2K`` best finished
  hypotheses (``patience=2``) with their scores, the log-probabilities are recovered, a
  hypothesis that reached the limit gets the log-probability of EOS after it (``score_batch``:
  qkv's forced EOS), and the best GNMT score wins. With ``alpha = 0`` this is qkv's beam search
  exactly: once the best candidate ends (CTranslate2 stops there), no live hypothesis can beat
  it, which is qkv's own stopping rule. With ``alpha > 0`` qkv searches on while a longer
  hypothesis could still win, which CTranslate2 cannot be asked to do, so the two can differ:
  ``tests/ctranslate2/test_ctranslate2.py`` measures how often.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qkv.data.tokens.special import EOS_TOKEN
from qkv.decoding.beam import gnmt_length_penalty

__all__ = ["Hypothesis", "search_tokens", "translate_tokens"]


@dataclass(frozen=True)
class Hypothesis:
    """One sentence's output as the search found it.

    Attributes:
        tokens: the output tokens, EOS excluded.
        ended: whether the search wrote EOS (``False``: it reached the sentence's limit, where
            qkv forces EOS).
        attention: with ``attention=True``, what CTranslate2 returns for it
            (``return_attention``): one row per token it wrote (EOS included when ``ended``),
            one column per source token it was given (the EOS it appends is left out); else
            ``None``.
    """

    tokens: list[str]
    ended: bool
    attention: list[list[float]] | None = None


def translate_tokens(
    translator: Any,
    sources: Sequence[Sequence[str]],
    *,
    beam_size: int,
    max_len: Sequence[int],
    length_penalty: float,
    eos: str = EOS_TOKEN,
    batch_size: int = 32,
) -> list[list[str]]:
    """Translate ``sources`` (token strings, EOS not included: the exported model appends it)
    with a ``ctranslate2.Translator`` under qkv's decoding rules (see the module doc).

    Args:
        beam_size: ``1`` for greedy search.
        max_len: each sentence's most output tokens, EOS not counted.
        length_penalty: ``alpha`` of qkv's GNMT penalty (beam search only).
        eos: the end token; batch_size: sentences per CTranslate2 call.

    Returns:
        Each sentence's output tokens, EOS excluded.
    """
    found = search_tokens(
        translator, sources, beam_size=beam_size, max_len=max_len,
        length_penalty=length_penalty, eos=eos, batch_size=batch_size,
    )  # fmt: skip
    return [hypothesis.tokens for hypothesis in found]


def search_tokens(
    translator: Any,
    sources: Sequence[Sequence[str]],
    *,
    beam_size: int,
    max_len: Sequence[int],
    length_penalty: float,
    eos: str = EOS_TOKEN,
    batch_size: int = 32,
    attention: bool = False,
) -> list[Hypothesis]:
    """:func:`translate_tokens`' search, each sentence's result as a :class:`Hypothesis`
    (with CTranslate2's attention when ``attention``: the returned tokens are the same)."""
    if len(max_len) != len(sources):
        raise ValueError(f"got {len(max_len)} max_len values for {len(sources)} sources")
    outputs = [Hypothesis([], False, [] if attention else None) for _ in sources]
    groups: dict[int, list[int]] = {}
    for index, limit in enumerate(max_len):
        groups.setdefault(int(limit), []).append(index)
    for limit, rows in sorted(groups.items()):
        if limit <= 0:
            continue  # qkv's first step may only end: an empty output
        batch = [list(sources[i]) for i in rows]
        common = {
            "max_decoding_length": limit,
            "min_decoding_length": 0,
            "max_input_length": 0,  # qkv checks lengths itself; never cut a source
            "max_batch_size": batch_size,
            "return_attention": attention,
        }
        if beam_size == 1:
            results = translator.translate_batch(
                batch, beam_size=1, length_penalty=0.0, return_end_token=True, **common
            )
            found = [
                _hypothesis(result.hypotheses[0], result.attention[0] if attention else None, eos)
                for result in results
            ]
        else:
            found = _beam(translator, batch, beam_size, length_penalty, eos, common)
        for index, hypothesis in zip(rows, found, strict=True):
            outputs[index] = hypothesis
    return outputs


def _hypothesis(tokens: Sequence[str], attention: Any, eos: str) -> Hypothesis:
    """CTranslate2's tokens (with the EOS they end with, if any) as a :class:`Hypothesis`."""
    ended = bool(tokens) and tokens[-1] == eos
    rows = None if attention is None else [list(row) for row in attention]
    return Hypothesis(list(tokens[:-1] if ended else tokens), ended, rows)


def _beam(
    translator: Any,
    batch: list[list[str]],
    beam_size: int,
    alpha: float,
    eos: str,
    common: dict[str, Any],
) -> list[Hypothesis]:
    """Beam search with qkv's GNMT ranking over CTranslate2's ``2K`` best hypotheses."""
    results = translator.translate_batch(
        batch,
        beam_size=beam_size,
        patience=2,
        num_hypotheses=2 * beam_size,
        length_penalty=alpha,
        return_scores=True,
        return_end_token=True,
        **common,
    )
    # (sentence, hypothesis, log P): CTranslate2's score is log P / |Y|^alpha, the EOS counted.
    candidates: list[tuple[int, Hypothesis, float]] = []
    unfinished: list[int] = []  # candidates that reached the limit without EOS
    for sentence, result in enumerate(results):
        maps = result.attention if common["return_attention"] else [None] * len(result.scores)
        for tokens, score, weights in zip(result.hypotheses, result.scores, maps, strict=True):
            hypothesis = _hypothesis(tokens, weights, eos)
            if not hypothesis.ended:
                unfinished.append(len(candidates))
            candidates.append((sentence, hypothesis, score * len(tokens) ** alpha))
    if unfinished:  # qkv forces EOS after the limit: add its log-probability
        scored = translator.score_batch(
            [batch[candidates[i][0]] for i in unfinished],
            [candidates[i][1].tokens for i in unfinished],
            max_input_length=0,
            max_batch_size=common["max_batch_size"],
        )
        for i, result in zip(unfinished, scored, strict=True):
            sentence, hypothesis, log_prob = candidates[i]
            candidates[i] = (sentence, hypothesis, log_prob + result.log_probs[-1])
    best: list[tuple[float, Hypothesis] | None] = [None] * len(batch)
    for sentence, hypothesis, log_prob in candidates:  # best first in a sentence: ties keep it
        score = log_prob / gnmt_length_penalty(len(hypothesis.tokens) + 1, alpha)
        found = best[sentence]
        if found is None or score > found[0]:
            best[sentence] = (score, hypothesis)
    empty = Hypothesis([], False, [] if common["return_attention"] else None)
    return [empty if found is None else found[1] for found in best]

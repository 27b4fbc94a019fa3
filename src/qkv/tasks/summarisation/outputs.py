"""What a text-to-text model (a summariser, a replier) wrote for one text (:class:`Response`),
and the scores of a split's outputs against their references (:func:`score_outputs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from qkv.data.pairs.summary_words import summary_text, summary_tokens
from qkv.data.tokens.special import UNK_TOKEN
from qkv.evaluation.bleu import corpus_scores
from qkv.evaluation.summaries import distinct_n, repeated_ngram_share, rouge_scores

__all__ = ["Response", "TextReport", "score_outputs"]


@dataclass(frozen=True)
class Response:
    """One output.

    Attributes:
        source: the input text; source_tokens: the words read, ``</s>`` included.
        text: the output, its ``tokens`` joined by spaces.
        copied: per output token, whether it is an out-of-vocabulary word of the source that
            the model copied (it cannot generate it).
        log_prob: the model's log-probability of the output, ``</s>`` included.
        attention: ``(T + 1, S)`` the attention of each output step over the source (the copy
            attention of a pointer-generator); ``None`` for a model without attention.
    """

    source: str
    source_tokens: list[str]
    text: str
    tokens: list[str]
    copied: list[bool]
    log_prob: float
    attention: Tensor | None


@dataclass(frozen=True)
class TextReport:
    """Scores of one split (see the module docstring) and its examples."""

    split: str
    scores: dict[str, float]
    examples: list[tuple[str, str, str]]  # (source, output, reference)
    noun: str

    def lines(self, examples: int = 3) -> list[str]:
        s = self.scores
        lines = [
            f"{self.split}: {int(s['pairs']):,} pairs, beam {int(s['beam_size'])}",
            f"ROUGE-1 {s['rouge1']:.2f}  ROUGE-2 {s['rouge2']:.2f}  ROUGE-L {s['rougeL']:.2f}  "
            f"ROUGE-Lsum {s['rougeLsum']:.2f}  (F1, rouge-score, stemmed)",
            f"{_bleu(s)}  perplexity {s['perplexity']:.2f}",
            f"repeated trigrams {s['repeated_trigrams']:.1%} (references "
            f"{s['reference_repeated_trigrams']:.1%})  distinct-1 {s['distinct1']:.3f}  "
            f"distinct-2 {s['distinct2']:.3f}",
            f"mean length {s['mean_length']:.1f} words (references "
            f"{s['reference_mean_length']:.1f})  copied {s['copied_share']:.1%}  "
            f"{UNK_TOKEN} {s['unk_share']:.1%}",
        ]
        for source, output, reference in self.examples[:examples]:
            shown = source if len(source) <= 300 else source[:300] + " ..."
            lines.append(f"\n  source     {shown}\n  qkv        {output}\n  reference  {reference}")
        return lines

    def record(self) -> dict[str, Any]:
        return dict(self.scores)


def _bleu(scores: dict[str, float]) -> str:
    """``BLEU 31.20``, or why there is no BLEU: sacrebleu's corpus BLEU is 0 by definition when
    no output has 4 words (it multiplies the precisions of 1- to 4-grams)."""
    if scores.get("bleu_defined", 1.0):
        return f"BLEU {scores['bleu']:.2f}"
    return (
        "BLEU undefined (no output has 4 words, so sacrebleu's 4-gram BLEU is 0 whatever they are)"
    )


def score_outputs(
    split: str,
    pairs: Sequence[tuple[str, str]],
    responses: Sequence[Response],
    *,
    beam: int,
    perplexity: float,
    noun: str = "output",
) -> TextReport:
    """The :class:`TextReport` of ``responses`` to ``pairs``' sources against their targets."""
    outputs = [r.tokens for r in responses]
    references = [summary_tokens(t) for _, t in pairs]
    hypotheses, refs = [r.text for r in responses], [summary_text(t) for t in references]
    words = max(sum(len(o) for o in outputs), 1)
    bleu = corpus_scores(hypotheses, refs)
    scores = {
        **rouge_scores(hypotheses, refs),
        "bleu": bleu.bleu,
        "bleu_defined": float(bleu.bleu_defined),
        "perplexity": perplexity,
        "repeated_trigrams": repeated_ngram_share(outputs, 3),
        "reference_repeated_trigrams": repeated_ngram_share(references, 3),
        "distinct1": distinct_n(outputs, 1),
        "distinct2": distinct_n(outputs, 2),
        "mean_length": sum(len(o) for o in outputs) / len(outputs),
        "reference_mean_length": sum(len(r) for r in references) / len(references),
        "copied_share": sum(sum(r.copied) for r in responses) / words,
        "unk_share": sum(o.count(UNK_TOKEN) for o in outputs) / words,
        "pairs": float(len(pairs)),
        "beam_size": float(beam),
    }
    examples = [(s, r.text, t) for (s, t), r in zip(pairs, responses, strict=True)]
    return TextReport(split, scores, examples, noun)

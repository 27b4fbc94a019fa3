"""Does a cloze reader's loss tell its attention where the answer is? The gradient of the
reader's loss on one question with respect to its attention scores (the energies before the
softmax), set against the direction that raises the attention mass on the answer's occurrences.

For scores ``s`` over a passage, attention ``α = softmax(s)`` and answer mass ``m = Σ_{i∈A} α_i``
(``A``: the positions where the answer word occurs), ``∂m/∂s_i = α_i (1[i∈A] − m)``. A step of
gradient descent on the scores changes ``m`` at the rate ``toward = −∇_s L · ∂m/∂s``; ``alignment``
is that rate divided by both vectors' norms (a cosine: 1 when the loss only asks the attention to
find the answer, about 0 when it asks for something unrelated).

The Attention Sum Reader's loss is ``−log(m / M)`` (``M``: the mass on every candidate), so its
gradient is ``−∂m/∂s / m + ∂M/∂s / M``: it always points at the answer. A reader that matches an
attended vector against the candidates (the Stanford reader) passes its attention only the
gradient of that match, each score's scaled by its weight ``α_i``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from qkv.attention.scores import Score
from qkv.models.cloze_reader import ClozeReader
from qkv.tasks.reading.words import ReadingBatch

__all__ = ["AttentionGradient", "attention_gradient", "score_gradients"]


@dataclass(frozen=True)
class AttentionGradient:
    """Means over the questions whose answer occurs in the passage (``questions`` of them):
    ``alignment`` (the cosine above), ``toward`` (the rate at which a unit step on the scores
    raises the answer's mass), ``grad_norm`` (``‖∇_s L‖``) and ``answer_mass`` (``m``)."""

    questions: int
    alignment: float
    toward: float
    grad_norm: float
    answer_mass: float


@contextmanager
def _captured_energies(score: Score) -> Iterator[list[Tensor]]:
    """While active, every ``score.energies`` output is kept in the yielded list."""
    seen: list[Tensor] = []
    original = score.energies

    def energies(query: Tensor, prepared: Tensor) -> Tensor:
        out = original(query, prepared)
        seen.append(out)
        return out

    score.energies = energies  # type: ignore[method-assign]  # an instance attribute, removed below
    try:
        yield seen
    finally:
        del score.energies


def score_gradients(model: ClozeReader, batch: ReadingBatch) -> tuple[Tensor, Tensor, Tensor]:
    """``(∇_s L (B, S), α (B, S), on_answer (B, S) bool)`` for one batch: ``L`` is the sum over
    the batch of each question's negative log-probability of its answer, so each row is that
    question's own gradient, in the model's dtype. The model's mode is the caller's (``eval()``
    for no dropout).

    Raises:
        ValueError: a reader without attention, or a batch without candidates and answers.
    """
    if model.score is None:
        raise ValueError(
            f"a {model.config.reader} reader has no attention scores: pass a reader that attends"
        )
    if batch.candidates is None or batch.answer is None:
        raise ValueError("the batch has no candidates and answers: pass a cloze batch")
    with _captured_energies(model.score) as seen:
        out = model(**batch.inputs())
    if len(seen) != 1:
        raise RuntimeError(f"expected one call of the score's energies, saw {len(seen)}")
    energies = seen[0]  # (B, 1, 1, S) or (B, 1, S): one query per question
    answer = batch.answer[:, None]  # (B, 1)
    loss = -out.log_probs.gather(1, answer).sum()
    (grad,) = torch.autograd.grad(loss, energies)
    b, s = batch.passage.shape
    weights = out.attention.detach()  # (B, S)
    on_answer = (batch.passage == batch.candidates.gather(1, answer)) & batch.passage_keep
    return grad.reshape(b, s), weights, on_answer


def attention_gradient(model: ClozeReader, batches: Iterable[ReadingBatch]) -> AttentionGradient:
    """The :class:`AttentionGradient` of ``model`` over ``batches`` (see the module docstring).

    Raises:
        ValueError: as :func:`score_gradients`, or no question whose answer is in its passage.
    """
    count = 0
    alignment = toward = norm = mass = 0.0
    for batch in batches:
        grad, weights, on = (t.double() for t in score_gradients(model, batch))
        m = (weights * on).sum(1)  # (B,)
        rise = weights * (on - m[:, None])  # ∂m/∂s (B, S)
        rate = -(grad * rise).sum(1)  # (B,)
        found = on.bool().any(1)
        cosine = rate / (grad.norm(dim=1) * rise.norm(dim=1)).clamp_min(1e-30)
        count += int(found.sum())
        alignment += float(cosine[found].sum())
        toward += float(rate[found].sum())
        norm += float(grad.norm(dim=1)[found].sum())
        mass += float(m[found].sum())
    if count == 0:
        raise ValueError("no question has its answer in its passage: nothing to measure")
    return AttentionGradient(count, alignment / count, toward / count, norm / count, mass / count)

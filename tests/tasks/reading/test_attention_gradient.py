"""The gradient of a cloze reader's loss at its attention scores: the Attention Sum Reader's against
its hand-derived form, the answer-mass rate against a finite difference, in float64."""

from __future__ import annotations

import pytest
import torch

from qkv.models.cloze_reader import ClozeReader, ClozeReaderConfig
from qkv.tasks.reading.attention_gradient import attention_gradient, score_gradients
from qkv.tasks.reading.words import ReadingBatch

V = 12


def batch() -> ReadingBatch:
    """Two questions; the answers (3 and 7) occur twice and once in their passages."""
    passage = torch.tensor([[3, 4, 3, 5, 6, 7], [7, 8, 9, 4, 0, 0]])
    question = torch.tensor([[4, 9, 0], [5, 6, 2]])
    candidates = torch.tensor([[5, 3, 7], [4, 7, 0]])
    return ReadingBatch(
        passage=passage, passage_keep=passage != 0, question=question,
        question_keep=question != 0, candidates=candidates, candidate_keep=candidates != 0,
        answer=torch.tensor([1, 1]),
    )  # fmt: skip


def reader(kind: str) -> ClozeReader:
    torch.manual_seed(0)
    config = ClozeReaderConfig(V, kind, embed_dim=6, hidden_dim=5, dropout=0.0)
    return ClozeReader(config).double().eval()


def test_the_as_readers_score_gradient_is_its_hand_derived_form():
    grad, alpha, on = score_gradients(reader("as_reader"), batch())
    candidate_words = torch.tensor([[5, 3, 7], [4, 7, 0]])
    on_candidate = (batch().passage[:, :, None] == candidate_words[:, None, :]).any(-1)
    on_candidate &= batch().passage_keep
    m = (alpha * on).sum(1, keepdim=True)
    mass = (alpha * on_candidate).sum(1, keepdim=True)
    # L = -log(m / M): dL/ds_i = -α_i (1[i∈A] - m) / m + α_i (1[i∈C] - M) / M
    expected = -alpha * (on.double() - m) / m + alpha * (on_candidate.double() - mass) / mass
    torch.testing.assert_close(grad, expected)
    assert on.tolist() == [[True, False, True, False, False, False],
                           [True, False, False, False, False, False]]  # fmt: skip
    assert grad[~batch().passage_keep].abs().max() == 0  # padding gets no gradient


@pytest.mark.parametrize("kind", ["as_reader", "stanford", "attentive"])
def test_toward_is_the_rate_at_which_a_descent_step_on_the_scores_raises_the_answer_mass(kind):
    """Finite difference: move the scores by -eps * grad, re-softmax, measure the mass."""
    model = reader(kind)
    grad, alpha, on = score_gradients(model, batch())
    keep = batch().passage_keep
    scores = torch.where(keep, alpha.double().clamp_min(1e-300).log(), -torch.inf)
    eps = 1e-6
    moved = torch.softmax(scores - eps * grad.double(), dim=1)
    finite = ((moved * on).sum(1) - (alpha.double() * on).sum(1)) / eps  # (B,)
    out = attention_gradient(model, [batch()])
    assert out.questions == 2
    assert out.toward == pytest.approx(float(finite.mean()), rel=1e-3, abs=1e-9)
    assert out.answer_mass == pytest.approx(float((alpha * on).sum(1).mean()))
    assert out.grad_norm == pytest.approx(float(grad.norm(dim=1).mean()))
    assert -1.0 <= out.alignment <= 1.0


def test_the_as_readers_gradient_always_raises_the_answer_mass():
    out = attention_gradient(reader("as_reader"), [batch()])
    assert out.toward > 0
    assert out.alignment > 0.5


def test_a_reader_without_attention_or_a_batch_without_answers_is_refused():
    with pytest.raises(ValueError, match="a no_attention reader has no attention scores"):
        score_gradients(reader("no_attention"), batch())
    spans = ReadingBatch(**{**batch().__dict__, "candidates": None, "answer": None})
    with pytest.raises(ValueError, match="the batch has no candidates and answers"):
        score_gradients(reader("stanford"), spans)


def test_the_score_is_left_as_it_was():
    model = reader("stanford")
    score_gradients(model, batch())
    assert "energies" not in vars(model.score)

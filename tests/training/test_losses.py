"""The loss against PyTorch's cross-entropy, and invariance to padding."""

import pytest
import torch
import torch.nn.functional as F

from qkv.training.losses import sequence_cross_entropy
from qkv.training.schedules import lr_multiplier

PAD = 0


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_equals_torch_cross_entropy_on_real_tokens(eps):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    targets = torch.randint(1, 7, (3, 5))
    targets[1, 3:] = PAD
    loss, n = sequence_cross_entropy(logits, targets, pad_id=PAD, label_smoothing=eps)
    keep = targets != PAD
    reference = F.cross_entropy(logits[keep], targets[keep], reduction="sum", label_smoothing=eps)
    torch.testing.assert_close(loss, reference)
    assert n.item() == keep.sum().item()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_padding_never_changes_the_loss(eps):
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6)
    targets = torch.randint(1, 6, (2, 4))
    loss, n = sequence_cross_entropy(logits, targets, pad_id=PAD, label_smoothing=eps)
    padded_logits = torch.cat([logits, torch.randn(2, 3, 6) * 50], dim=1)
    padded_targets = torch.cat([targets, torch.full((2, 3), PAD)], dim=1)
    loss2, n2 = sequence_cross_entropy(
        padded_logits, padded_targets, pad_id=PAD, label_smoothing=eps
    )
    torch.testing.assert_close(loss2, loss)
    assert n2 == n


def test_smoothing_by_hand():
    # Two classes, uniform logits: -log p = log 2 for every class, whatever eps.
    loss, _ = sequence_cross_entropy(
        torch.zeros(1, 1, 2), torch.tensor([[1]]), pad_id=PAD, label_smoothing=0.3
    )
    assert loss.item() == pytest.approx(torch.log(torch.tensor(2.0)).item())


def test_bad_smoothing_and_shapes():
    with pytest.raises(ValueError, match="label_smoothing"):
        sequence_cross_entropy(
            torch.zeros(1, 1, 2), torch.ones(1, 1).long(), pad_id=0, label_smoothing=1.0
        )
    with pytest.raises(ValueError, match=r"\(1, 2, 2\).*\(1, 3\)"):
        sequence_cross_entropy(torch.zeros(1, 2, 2), torch.ones(1, 3).long(), pad_id=0)


def test_schedules():
    noam = lr_multiplier("inverse_sqrt", warmup=4)
    assert [round(noam(s), 4) for s in range(6)] == [
        0.25,
        0.5,
        0.75,
        1.0,
        round((4 / 5) ** 0.5, 4),
        round((4 / 6) ** 0.5, 4),
    ]
    cosine = lr_multiplier("cosine", warmup=2, total=12, min_ratio=0.1)
    assert (
        cosine(1) == 1.0 and cosine(12) == pytest.approx(0.1) and cosine(7) == pytest.approx(0.55)
    )
    assert lr_multiplier("constant", warmup=0)(100) == 1.0
    with pytest.raises(ValueError, match="unknown schedule 'linear'"):
        lr_multiplier("linear", warmup=1)

"""Mask helpers: hand-computed cases pin the convention (True = may attend) and alignment."""

import pytest
import torch

from qkv.attention.masks import (
    as_4d,
    causal_mask,
    check_mask,
    combine_masks,
    from_key_padding,
    padding_mask,
)


def test_padding_mask_by_hand():
    keep = padding_mask(torch.tensor([2, 0, 3]), 4)
    assert keep.shape == (3, 1, 1, 4)
    expected = torch.tensor(
        [[True, True, False, False], [False, False, False, False], [True, True, True, False]]
    )
    assert torch.equal(keep[:, 0, 0], expected)


def test_padding_mask_default_length_is_longest():
    assert padding_mask(torch.tensor([1, 3])).shape == (2, 1, 1, 3)


@pytest.mark.parametrize(
    ("lengths", "max_len", "message"),
    [
        (torch.tensor([5]), 4, "max_len=4"),
        (torch.tensor([-1]), 4, "min -1"),
        (torch.tensor([[1]]), 4, "1-d"),
        (torch.tensor([1.0]), 4, "integer"),
    ],
)
def test_padding_mask_rejects_bad_lengths(lengths, max_len, message):
    with pytest.raises(ValueError, match=message):
        padding_mask(lengths, max_len)


def test_causal_mask_square_is_lower_triangle():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())


def test_causal_mask_2_by_5_is_bottom_right_aligned():
    # Two new queries at positions 3 and 4 of a 5-key sequence: the last query sees everything.
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool()
    assert torch.equal(causal_mask(2, 5), expected)


def test_causal_mask_more_queries_than_keys_leaves_early_rows_empty():
    expected = torch.tensor([[0, 0], [0, 0], [1, 0], [1, 1]]).bool()
    assert torch.equal(causal_mask(4, 2), expected)


def test_combine_masks_is_and_and_keeps_broadcast_shape():
    keep = combine_masks(padding_mask(torch.tensor([2, 3]), 3), None, causal_mask(3))
    assert keep.shape == (2, 1, 3, 3)
    assert torch.equal(keep[0, 0], torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 0]]).bool())
    assert combine_masks(None, None) is None
    with pytest.raises(ValueError, match="boolean"):
        combine_masks(torch.zeros(2, 2))


def test_from_key_padding_flips_pytorch_polarity():
    # torch.nn.MultiheadAttention: True = ignore. qkv: True = attend.
    keep = from_key_padding(torch.tensor([[False, True]]))
    assert torch.equal(keep, torch.tensor([True, False]).view(1, 1, 1, 2))
    with pytest.raises(ValueError, match="True = ignore"):
        from_key_padding(torch.zeros(2, 2))


def test_check_mask_names_the_shapes():
    check_mask(torch.ones(2, 1, 1, 5, dtype=torch.bool), (2, 4, 3, 5))
    check_mask(torch.ones(3, 5, dtype=torch.bool), (2, 4, 3, 5))
    with pytest.raises(ValueError, match=r"\(2, 1, 1, 4\).*\(2, 4, 3, 5\)"):
        check_mask(torch.ones(2, 1, 1, 4, dtype=torch.bool), (2, 4, 3, 5))
    with pytest.raises(ValueError, match="at most 4"):
        check_mask(torch.ones(1, 2, 1, 1, 5, dtype=torch.bool), (2, 4, 3, 5))


def test_as_4d():
    assert as_4d(torch.ones(3, 5)).shape == (1, 1, 3, 5)

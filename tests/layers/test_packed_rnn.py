"""BiRNN: a bidirectional RNN over right-padded sequences equals PyTorch's packed bidirectional
RNN with the same weights, at every real position and in its final states."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from qkv.layers.packed_rnn import BiRNN, reverse_within


def test_reverse_within_reverses_real_positions_only():
    x = torch.arange(8).view(2, 4)
    assert reverse_within(x, torch.tensor([4, 2])).tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("layers", [1, 2])
def test_equals_a_packed_bidirectional_rnn(cell, layers):
    torch.manual_seed(0)
    ours = BiRNN(cell, 5, 4, layers).double().eval()
    reference = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](
        5, 4, layers, batch_first=True, bidirectional=True
    ).double()
    with torch.no_grad():
        for layer in range(layers):
            for mine, suffix in (
                (ours.forward_rnns[layer], ""),
                (ours.backward_rnns[layer], "_reverse"),
            ):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(reference, f"{name}_l{layer}{suffix}").copy_(
                        getattr(mine, f"{name}_l0")
                    )
    lengths = torch.tensor([6, 3, 1])
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    x[1, 3:] = 1e6  # garbage under padding never reaches a real position
    run = ours(x, lengths)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h_n = reference(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=6)
    h_n = h_n[0] if cell == "lstm" else h_n
    assert torch.allclose(run.states, states, atol=1e-12)
    assert torch.allclose(run.final, torch.cat([h_n[-2], h_n[-1]], -1), atol=1e-12)
    assert (run.states[1, 3:] == 0).all()

"""Tests for qkv.layers.recurrent: packed bidirectional encoder, prepared scores, maxout, state."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from qkv.attention import Dot, General, padding_mask
from qkv.layers.recurrent import EncoderOutput, Maxout, RecurrentEncoder, RecurrentState
from qkv.layers.recurrent_decoders import FixedContextDecoder, LuongDecoder

LENGTHS = torch.tensor([3, 6, 1, 4])  # unsorted on purpose: packing must restore the order


pytestmark = pytest.mark.usefixtures("one_thread")


def _source(vocab: int = 11, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (len(LENGTHS), int(LENGTHS.max())), generator=gen)  # (B, S)
    return src.masked_fill(~padding_mask(LENGTHS)[:, 0, 0], 0)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_encoder_equals_each_sentence_run_alone(cell: str, num_layers: int) -> None:
    torch.manual_seed(0)
    hidden = 5
    enc = RecurrentEncoder(11, 4, hidden, num_layers=num_layers, cell=cell, dropout=0.3).eval()
    src = _source()
    out = enc(src, LENGTHS)
    assert out.memory.shape == (4, 6, 2 * hidden)
    assert out.final.shape == (4, num_layers, 2 * hidden)
    assert (out.final_cell is None) == (cell == "gru")
    torch.testing.assert_close(out.keep, padding_mask(LENGTHS)[:, 0])
    for b, n in enumerate(LENGTHS.tolist()):
        # The same RNN on the unpadded sentence alone, no packing involved.
        alone, hn = enc.rnn(enc.embed(src[b : b + 1, :n]))  # (1, n, 2He)
        torch.testing.assert_close(out.memory[b, :n], alone[0], atol=1e-6, rtol=0)
        assert (out.memory[b, n:] == 0).all()
        hn, cn = hn if isinstance(hn, tuple) else (hn, None)
        for got, states in ((out.final, hn), (out.final_cell, cn)):
            if states is None:
                continue
            states = states.view(num_layers, 2, hidden)  # (2L, 1, He) -> (L, direction, He)
            expected = torch.cat([states[:, 0], states[:, 1]], dim=-1)  # (L, 2He)
            torch.testing.assert_close(got[b], expected, atol=1e-6, rtol=0)
        # The top layer's final states are the last forward and the first backward outputs.
        top = torch.cat([out.memory[b, n - 1, :hidden], out.memory[b, 0, hidden:]])
        torch.testing.assert_close(out.final[b, -1], top, atol=1e-6, rtol=0)


def test_encoder_ignores_padding_tokens_and_extra_padding() -> None:
    torch.manual_seed(0)
    enc = RecurrentEncoder(11, 4, 5, num_layers=2).eval()
    src = _source()
    base = enc(src, LENGTHS)
    noisy = src.masked_scatter(src == 0, torch.randint(3, 11, (int((src == 0).sum()),)))
    longer = torch.cat([noisy, torch.full((4, 3), 7)], dim=1)  # (B, S + 3), garbage padding
    out = enc(longer, LENGTHS)
    torch.testing.assert_close(out.memory[:, :6], base.memory, atol=1e-6, rtol=0)
    assert (out.memory[:, 6:] == 0).all()
    torch.testing.assert_close(out.final, base.final, atol=1e-6, rtol=0)


def test_encoder_rejects_unknown_cell() -> None:
    with pytest.raises(ValueError, match="'rnn'"):
        RecurrentEncoder(11, 4, 5, cell="rnn")


def test_maxout_takes_the_max_of_each_pool() -> None:
    torch.manual_seed(0)
    layer = Maxout(5, 3, pool=2)
    x = torch.randn(4, 5)
    pieces = x @ layer.linear.weight.T + layer.linear.bias  # (4, 6): unit i owns 2i, 2i + 1
    expected = torch.stack([pieces[:, 2 * i : 2 * i + 2].max(dim=-1).values for i in range(3)], -1)
    torch.testing.assert_close(layer(x), expected)


def test_state_index_select_covers_every_tensor() -> None:
    state = RecurrentState(
        hidden=torch.arange(3.0).view(3, 1, 1),
        memory=torch.arange(3.0).view(3, 1, 1) + 10,
        keep=torch.tensor([[[True]], [[False]], [[True]]]),
    )
    index = torch.tensor([2, 2, 0])
    picked = state.index_select(index)
    assert picked.hidden.flatten().tolist() == [2.0, 2.0, 0.0]
    assert picked.memory.flatten().tolist() == [12.0, 12.0, 10.0]
    assert picked.keep.flatten().tolist() == [True, True, True]
    assert picked.cell is None and picked.feed is None and picked.context is None


def _encoded(cell: str, num_layers: int = 2, memory_dim: int = 6) -> EncoderOutput:
    b, s = 3, 5
    final_cell = torch.randn(b, num_layers, memory_dim) if cell == "lstm" else None
    keep = padding_mask(torch.tensor([5, 3, 1]))[:, 0]  # (B, 1, S)
    memory = torch.randn(b, s, memory_dim) * keep.transpose(1, 2)  # (B, S, 2He)
    return EncoderOutput(memory, keep, torch.randn(b, num_layers, memory_dim), final_cell)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_fixed_context_fast_path_equals_stepping(cell: str) -> None:
    torch.manual_seed(0)
    dec = FixedContextDecoder(cell, 4, 6, 6, num_layers=2).eval()
    encoded, emb = _encoded(cell), torch.randn(3, 5, 4)  # emb (B, T, E)
    features, weights = dec(emb, dec.init_state(encoded))  # one RNN call over T
    assert weights is None
    state = dec.init_state(encoded)
    for t in range(5):
        out, state, w = dec.step(emb[:, t], state)
        assert w is None
        torch.testing.assert_close(out, features[:, t], atol=1e-6, rtol=0)


def test_decoder_rejects_mismatched_encoder_states() -> None:
    dec = LuongDecoder("lstm", 4, 6, 6, score=Dot())
    with pytest.raises(ValueError, match="final_cell"):
        dec.init_state(_encoded("gru", num_layers=1))
    with pytest.raises(ValueError, match="2 layers"):
        dec.init_state(_encoded("lstm", num_layers=2))


def test_luong_input_feeding_carries_the_attentional_vector() -> None:
    torch.manual_seed(0)
    dec = LuongDecoder("gru", 4, 6, 6, score=General(6)).eval()
    state = dec.init_state(_encoded("gru", num_layers=1))
    assert (state.feed == 0).all()  # h~_0 = 0
    emb = torch.randn(3, 4)
    out, next_state, _ = dec.step(emb, state)
    torch.testing.assert_close(next_state.feed, out)
    moved, _, _ = dec.step(emb, replace(state, feed=torch.randn(3, 6)))
    assert not torch.allclose(moved, out)  # the fed vector enters the RNN input
    assert isinstance(dec.rnn, nn.GRU) and dec.rnn.input_size == 4 + 6

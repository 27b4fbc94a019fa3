"""Feed-forward network and Transformer layers against hand-written eq. (2) and PyTorch's layers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import causal_mask, padding_mask
from qkv.attention.multihead import MultiHeadAttention
from qkv.layers.feedforward import PositionwiseFeedForward
from qkv.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

D, H, FF = 16, 4, 24
ATOL = 1e-5


def _randomize(module: nn.Module) -> nn.Module:
    """Non-trivial LayerNorm gains/biases and biases, so that copying them is tested."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.3)
    return module.eval()


def copy_layer(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy a ``torch.nn.Transformer{Encoder,Decoder}Layer`` into our layer of the same kind."""
    ours.self_attn = MultiHeadAttention.from_torch(theirs.self_attn)
    if hasattr(theirs, "multihead_attn"):
        ours.cross_attn = MultiHeadAttention.from_torch(theirs.multihead_attn)
    ours.ffn.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.ffn.linear2.load_state_dict(theirs.linear2.state_dict())
    for name in ("norm1", "norm2", "norm3"):
        if hasattr(theirs, name):
            getattr(ours, name).load_state_dict(getattr(theirs, name).state_dict())


# -- feed-forward, eq. (2) ------------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feedforward_is_equation_2(activation):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(D, FF, activation=activation)
    x = torch.randn(2, 5, D)
    w1, b1 = ffn.linear1.weight, ffn.linear1.bias
    w2, b2 = ffn.linear2.weight, ffn.linear2.bias
    act = torch.relu if activation == "relu" else F.gelu
    expected = act(x @ w1.T + b1) @ w2.T + b2  # max(0, x W_1 + b_1) W_2 + b_2
    torch.testing.assert_close(ffn(x), expected, atol=1e-6, rtol=1e-5)
    # position-wise: each position is transformed alone
    torch.testing.assert_close(ffn(x[:, 2:3]), ffn(x)[:, 2:3], atol=1e-6, rtol=1e-5)


def test_feedforward_rejects_bad_arguments():
    with pytest.raises(ValueError, match="'swish'"):
        PositionwiseFeedForward(D, FF, activation="swish")
    with pytest.raises(ValueError, match="d_ff"):
        PositionwiseFeedForward(D, 0)
    with pytest.raises(ValueError, match=r"1\.5"):
        PositionwiseFeedForward(D, FF, dropout=1.5)


# -- layers against PyTorch -----------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_equals_torch(norm_first, activation):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    theirs = _randomize(theirs)
    ours = TransformerEncoderLayer(
        D, H, FF, dropout=0.0, activation=activation, norm_first=norm_first
    ).eval()
    copy_layer(ours, theirs)
    x = torch.randn(3, 7, D)
    lengths = torch.tensor([7, 4, 1])
    keep = padding_mask(lengths, 7)  # (B, 1, 1, S)
    expected = theirs(x, src_key_padding_mask=~keep[:, 0, 0])
    out = ours(x, keep=keep)
    torch.testing.assert_close(out.hidden, expected, atol=ATOL, rtol=ATOL)
    assert out.self_weights is None


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_layer_equals_torch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    theirs = _randomize(theirs)
    ours = TransformerDecoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first).eval()
    copy_layer(ours, theirs)
    x, memory = torch.randn(3, 6, D), torch.randn(3, 5, D)
    keep = padding_mask(torch.tensor([5, 2, 3]), 5)
    expected = theirs(
        x,
        memory,
        tgt_mask=~causal_mask(6),  # PyTorch: True = ignore
        tgt_is_causal=True,
        memory_key_padding_mask=~keep[:, 0, 0],
    )
    out = ours(x, memory, memory_keep=keep)
    torch.testing.assert_close(out.hidden, expected, atol=ATOL, rtol=ATOL)


# -- weights, caches, stacks ----------------------------------------------------------------------


def _decoder_layer(norm_first: bool = False) -> TransformerDecoderLayer:
    torch.manual_seed(0)
    return _randomize(TransformerDecoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_need_weights_changes_nothing_and_has_the_documented_shapes(norm_first):
    layer = _decoder_layer(norm_first)
    x, memory = torch.randn(2, 6, D), torch.randn(2, 5, D)
    keep = padding_mask(torch.tensor([5, 3]), 5)
    plain = layer(x, memory, memory_keep=keep)
    weighted = layer(x, memory, memory_keep=keep, need_weights=True)
    torch.testing.assert_close(weighted.hidden, plain.hidden, atol=1e-6, rtol=1e-6)
    assert weighted.self_weights.shape == (2, H, 6, 6)
    assert weighted.cross_weights.shape == (2, H, 6, 5)
    # causal: no weight above the diagonal; padding: none on padded keys; rows sum to one
    assert torch.all(weighted.self_weights.triu(diagonal=1) == 0)
    assert torch.all(weighted.cross_weights[1, :, :, 3:] == 0)
    torch.testing.assert_close(weighted.cross_weights.sum(-1), torch.ones(2, H, 6))

    encoder = _randomize(TransformerEncoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first))
    plain, weighted = encoder(memory, keep=keep), encoder(memory, keep=keep, need_weights=True)
    torch.testing.assert_close(weighted.hidden, plain.hidden, atol=1e-6, rtol=1e-6)
    assert weighted.self_weights.shape == (2, H, 5, 5)
    assert torch.all(weighted.self_weights[1, :, :, 3:] == 0)


@pytest.mark.parametrize("preallocate", [False, True])
def test_cached_decoder_layer_equals_uncached_in_blocks(preallocate):
    """Blocks of 2, 1 and 3 new positions after a cache: the causal mask must align bottom-right."""
    layer = _decoder_layer()
    x, memory = torch.randn(2, 6, D), torch.randn(2, 5, D)
    keep = padding_mask(torch.tensor([5, 3]), 5)
    expected = layer(x, memory, memory_keep=keep).hidden
    self_cache = layer.self_attn.new_cache(2, 6 if preallocate else None)
    cross_cache = KVCache.static(*layer.cross_attn.project_kv(memory))
    pieces = []
    for block in (slice(0, 2), slice(2, 3), slice(3, 6)):
        out = layer(x[:, block], memory_keep=keep, self_cache=self_cache, cross_cache=cross_cache)
        pieces.append(out.hidden)
    assert self_cache.length == 6
    torch.testing.assert_close(torch.cat(pieces, dim=1), expected, atol=ATOL, rtol=ATOL)


def test_decoder_layer_needs_exactly_one_source_of_memory():
    layer = _decoder_layer()
    x, memory = torch.randn(1, 2, D), torch.randn(1, 3, D)
    with pytest.raises(ValueError, match="exactly one"):
        layer(x)
    cache = KVCache.static(*layer.cross_attn.project_kv(memory))
    with pytest.raises(ValueError, match="exactly one"):
        layer(x, memory, cross_cache=cache)


def test_stacks_final_norm_only_for_pre_norm_and_validate():
    assert isinstance(TransformerEncoder(2, D, H, FF).norm, nn.Identity)
    assert isinstance(TransformerDecoder(2, D, H, FF, norm_first=True).norm, nn.LayerNorm)
    with pytest.raises(ValueError, match="num_layers"):
        TransformerEncoder(0, D, H, FF)
    with pytest.raises(ValueError, match="d_model=15 is not divisible by num_heads=4"):
        TransformerEncoderLayer(15, 4, FF)
    decoder = TransformerDecoder(2, D, H, FF).eval()
    memory = torch.randn(1, 3, D)
    with pytest.raises(ValueError, match="1 caches for 2 layers"):
        decoder(
            torch.randn(1, 1, D), memory, self_caches=[decoder.layers[0].self_attn.new_cache(1)]
        )


def test_decoder_stack_last_cross_weights_only():
    torch.manual_seed(0)
    decoder = TransformerDecoder(3, D, H, FF, dropout=0.0).eval()
    x, memory = torch.randn(2, 4, D), torch.randn(2, 5, D)
    full = decoder(x, memory, need_weights=True)
    last = decoder(x, memory, need_cross_weights=True)
    assert len(full.self_weights) == len(full.cross_weights) == 3
    assert last.self_weights == [] and len(last.cross_weights) == 1
    torch.testing.assert_close(last.cross_weights[0], full.cross_weights[-1])
    torch.testing.assert_close(last.hidden, full.hidden, atol=1e-6, rtol=1e-6)

"""BertEncoder: shapes, padding invariance, weights that change nothing, the packed inference path
against the module path, dropout, gradients, and bad configs and inputs."""

from __future__ import annotations

import pytest
import torch

from qkv.models.bert.model import PRESETS, BertConfig, BertEncoder
from qkv.models.registry import build_config, build_model

V = 128


def tiny(**overrides) -> BertEncoder:
    torch.manual_seed(0)
    model = BertEncoder(BertConfig.preset("tiny", **overrides)).eval()
    with torch.no_grad():  # BERT zero-initialises biases and unit-initialises norms: perturb all
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def padded(rows: list[torch.Tensor], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(B, T)`` ids and their keep-mask."""
    longest = max(len(r) for r in rows)
    ids = torch.full((len(rows), longest), pad)
    keep = torch.zeros(len(rows), longest, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)], keep[i, : len(row)] = row, True
    return ids, keep


pytestmark = pytest.mark.usefixtures("one_thread")


def test_shapes_and_attention_rows():
    model = tiny()
    ids, keep = padded([torch.randint(1, V, (9,)), torch.randint(1, V, (5,))])
    with torch.no_grad():
        out = model(ids, keep=keep, need_weights=True)
    assert out.hidden.shape == (2, 9, 32) and out.pooled.shape == (2, 32)
    assert len(out.attentions) == 2
    for weights in out.attentions:
        assert weights.shape == (2, 4, 9, 9)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 9))
        assert torch.all(weights[1, :, :, 5:] == 0)  # padded keys get no weight
    assert model(ids).attentions is None


def test_a_sentence_alone_equals_it_in_a_padded_batch_with_garbage_padding():
    model = tiny()
    short, long_ = torch.randint(1, V, (4,)), torch.randint(1, V, (11,))
    ids, keep = padded([short, long_])
    ids[0, 4:] = V - 1  # garbage at padded positions must not leak into real ones
    types = torch.zeros_like(ids)
    types[1, 6:] = 1
    with torch.no_grad():
        batched = model(ids, keep=keep, token_type_ids=types)
        alone_short = model(short[None])
        alone_long = model(long_[None], token_type_ids=types[1:])
    torch.testing.assert_close(batched.hidden[0, :4], alone_short.hidden[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched.hidden[1], alone_long.hidden[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched.pooled[0], alone_short.pooled[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched.pooled[1], alone_long.pooled[0], atol=1e-5, rtol=0)


def test_segment_types_change_the_output():
    model = tiny()
    ids = torch.randint(1, V, (1, 6))
    with torch.no_grad():
        zero = model(ids).hidden
        ones = model(ids, token_type_ids=torch.ones_like(ids)).hidden
        explicit_zero = model(ids, token_type_ids=torch.zeros_like(ids)).hidden
    torch.testing.assert_close(explicit_zero, zero, atol=0, rtol=0)
    assert not torch.allclose(ones, zero)


def test_need_weights_does_not_change_hidden():
    model = tiny()
    ids, keep = padded([torch.randint(1, V, (7,)), torch.randint(1, V, (3,))])
    with torch.no_grad():
        plain = model(ids, keep=keep)
        weighted = model(ids, keep=keep, need_weights=True)
    torch.testing.assert_close(weighted.hidden, plain.hidden, atol=1e-6, rtol=0)
    torch.testing.assert_close(weighted.pooled, plain.pooled, atol=1e-6, rtol=0)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu"])
def test_packed_inference_equals_the_module_path(activation):
    model = tiny(activation=activation)
    lengths = [7, 1, 12, 7, 7, 3, 12]  # unsorted, repeated, a single token
    ids, keep = padded([torch.randint(1, V, (n,)) for n in lengths])
    with torch.no_grad():
        expected = model(ids, keep=keep).hidden[keep]  # (L, D)
    got = model.packed_hidden(ids, torch.tensor(lengths))
    assert got.shape == (sum(lengths), 32)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_packed_inference_follows_weight_updates():
    model = tiny()
    ids = torch.randint(1, V, (2, 5))
    lengths = torch.tensor([5, 5])
    before = model.packed_hidden(ids, lengths)
    with torch.no_grad():
        bias = model.encoder.layers[1].ffn.linear2.bias  # not a constant: LayerNorm follows
        bias.add_(torch.randn_like(bias))
        expected = model(ids).hidden.flatten(0, 1)
    after = model.packed_hidden(ids, lengths)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=0)


def test_packed_inference_rejects_bad_lengths():
    model = tiny()
    ids = torch.randint(1, V, (2, 5))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, T=5\], got min 0"):
        model.packed_hidden(ids, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"shape \(B,\) = \(2,\)"):
        model.packed_hidden(ids, torch.tensor([5]))


def test_dropout_only_in_training_and_at_berts_rates():
    model = tiny(dropout=0.3, attention_dropout=0.2)
    layer = model.encoder.layers[0]
    assert layer.self_attn.dropout == 0.2 and layer.dropout1.p == 0.3
    assert layer.ffn.dropout.p == 0.0  # BERT has no dropout on the FFN's hidden activations
    ids = torch.randint(1, V, (2, 8))
    with torch.no_grad():
        first, second = model(ids).hidden, model(ids).hidden
        assert torch.equal(first, second)
        model.train()
        assert not torch.allclose(model(ids).hidden, first)


def test_every_parameter_gets_a_finite_gradient():
    model = tiny().train()
    ids, keep = padded([torch.randint(1, V, (6,)), torch.randint(1, V, (2,))])
    out = model(ids, keep=keep, token_type_ids=torch.ones_like(ids))
    (out.hidden[keep].square().mean() + out.pooled.sum()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name != "word_embeddings.weight":
            assert p.grad.abs().sum() > 0, name


def test_presets_and_the_registry():
    minilm = BertConfig.preset("minilm-l6")
    assert (minilm.num_layers, minilm.hidden_size, minilm.num_heads) == (6, 384, 12)
    assert (minilm.intermediate_size, minilm.vocab_size, minilm.layer_norm_eps) == (
        1536,
        30522,
        1e-12,
    )
    assert BertConfig.preset("tiny", num_layers=3).num_layers == 3
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        BertConfig.preset("huge")
    config = build_config("bert", PRESETS["tiny"])
    assert isinstance(build_model("bert", config), BertEncoder)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"hidden_size": 30}, "hidden_size=30 is not divisible by num_heads=4"),
        ({"num_layers": 0}, "num_layers must be a positive int, got 0"),
        ({"vocab_size": 12.0}, "vocab_size must be a positive int, got 12.0"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"attention_dropout": -0.1}, r"attention_dropout must be in \[0, 1\), got -0.1"),
        ({"activation": "swish"}, "activation must be one of .* got 'swish'"),
        ({"pad_token_id": 128}, r"pad_token_id must be in \[0, vocab_size=128\), got 128"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0, got 0.0"),
    ],
)
def test_bad_configs_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        BertConfig.preset("tiny", **overrides)


def test_bad_inputs_are_named():
    model = tiny()
    ids = torch.randint(1, V, (2, 5))
    cases = [
        (dict(ids=ids + V), r"token ids must lie in \[0, vocab_size=128\)"),
        (dict(ids=torch.ones(1, 65, dtype=torch.long)), "65 tokens, .*max_position_embeddings=64"),
        (dict(ids=torch.ones(0, 5, dtype=torch.long)), r"B, T >= 1, got shape \(0, 5\)"),
        (dict(ids=torch.ones(2, 0, dtype=torch.long)), r"B, T >= 1, got shape \(2, 0\)"),
        (dict(ids=ids.float()), "integer token ids, got dtype torch.float32"),
        (dict(ids=ids, keep=torch.ones(2, 4, dtype=torch.bool)), r"boolean .* shape \(2, 4\)"),
        (dict(ids=ids, keep=torch.ones(2, 5)), r"keep must be a boolean keep-mask .*torch.float32"),
        (dict(ids=ids, token_type_ids=torch.full((2, 5), 2)), r"type_vocab_size=2\), got min 2"),
        (dict(ids=ids, token_type_ids=torch.zeros(2, 3)), r"token_type_ids must have the shape"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            model(kwargs.pop("ids"), **kwargs)

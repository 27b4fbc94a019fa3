"""TransformerLM: causality, the KV cache, padding, positions, and bad input."""

from __future__ import annotations

import pytest
import torch

from qkv.models.language_model.model import PRESETS, TransformerLM, TransformerLMConfig

V = 37
VARIANTS = {
    "learned": dict(positions="learned"),
    "rotary": dict(positions="rotary"),
    "grouped-query": dict(positions="rotary", num_kv_heads=2),
}


def tiny(**overrides) -> TransformerLM:
    torch.manual_seed(0)
    config = TransformerLMConfig.preset("tiny", V, max_len=32, **overrides)
    return TransformerLM(config).eval()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_changing_a_later_token_never_changes_earlier_logits(preset):
    # Causality over every preset's real sizes (the two large ones with 2 layers, to stay fast).
    torch.manual_seed(0)
    sizes = {"num_layers": 2} if PRESETS[preset]["d_model"] > 256 else {}
    model = TransformerLM(TransformerLMConfig.preset(preset, V, dropout=0.0, **sizes)).eval()
    ids = torch.randint(0, V, (2, 12))
    with torch.no_grad():
        base = model(ids).logits
        for t in (0, 5, 10):
            changed = ids.clone()
            changed[:, t + 1] = (changed[:, t + 1] + 1) % V
            logits = model(changed).logits
            torch.testing.assert_close(logits[:, : t + 1], base[:, : t + 1], atol=1e-6, rtol=0)
            assert not torch.allclose(logits[:, t + 1], base[:, t + 1])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_feeding_through_the_cache_equals_one_pass(variant):
    model = tiny(**VARIANTS[variant])
    ids = torch.randint(0, V, (3, 10))
    with torch.no_grad():
        full = model(ids).logits
        caches = model.new_caches(3, max_len=10)
        parts = [model(ids[:, :4], caches=caches).logits]  # a prompt block, then one by one
        parts += [model(ids[:, t : t + 1], caches=caches).logits for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_left_padding_changes_no_real_token(variant):
    model = tiny(**VARIANTS[variant])
    short, long_ = torch.randint(1, V, (5,)), torch.randint(1, V, (9,))
    ids = torch.zeros(2, 9, dtype=torch.long)
    ids[0, 4:], ids[1] = short, long_
    keep = ids != 0
    keep[1] = True
    with torch.no_grad():
        batched = model(ids, keep=keep).logits
        alone_short = model(short[None]).logits
        alone_long = model(long_[None]).logits
    torch.testing.assert_close(batched[0, 4:], alone_short[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched[1], alone_long[0], atol=1e-5, rtol=0)


def test_weights_are_tied_unless_asked_not_to():
    model = tiny()
    assert model.output_proj.weight is model.embed.weight
    untied = tiny(tie_weights=False)
    assert untied.output_proj.weight is not untied.embed.weight


def test_attention_weights_are_causal_rows_of_probabilities():
    model = tiny()
    ids = torch.randint(0, V, (2, 7))
    with torch.no_grad():
        out = model(ids, need_weights=True)
    weights = out.attentions["decoder"]
    assert len(weights) == 2 and weights[0].shape == (2, 4, 7, 7)
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
        assert (w.triu(diagonal=1) == 0).all()
    torch.testing.assert_close(out.logits, model(ids).logits.detach())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m(torch.zeros(1, 33, dtype=torch.long)), "sequence too long.*max_len=32"),
        (lambda m: m(torch.zeros(1, 0, dtype=torch.long)), r"T >= 1"),
        (
            lambda m: m(
                torch.zeros(2, 3, dtype=torch.long), keep=torch.ones(2, 4, dtype=torch.bool)
            ),
            r"keep must be \(B, cached \+ T\)",
        ),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(tiny())


@pytest.mark.parametrize(
    "values, message",
    [
        ({"num_kv_heads": 3}, "multiple of num_kv_heads"),
        ({"positions": "alibi"}, "positions must be one of"),
        ({"d_model": 60, "num_heads": 4, "positions": "rotary", "num_layers": 1}, "even head"),
        ({"activation": "swish"}, "activation must be one of"),
    ],
)
def test_bad_configs_are_named(values, message):
    with pytest.raises(ValueError, match=message):
        TransformerLMConfig.preset("tiny", V, **values)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown preset 'huge'; known: tiny"):
        TransformerLMConfig.preset("huge", V)


def test_the_inference_projection_equals_training_and_follows_weight_updates():
    model = tiny()
    ids = torch.randint(0, V, (2, 6))
    with torch.no_grad():
        fast = model(ids).logits  # the transposed-copy path
        last = model(ids, last_only=True).logits
    slow = model(ids).logits.detach()  # grad enabled: F.linear
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    torch.testing.assert_close(last, slow[:, -1:], atol=1e-5, rtol=0)
    optimiser = torch.optim.SGD(model.parameters(), lr=1.0)
    model(ids).logits.sum().backward()
    optimiser.step()  # an in-place update of the tied weight: the cached copy must follow
    with torch.no_grad():
        after = model(ids).logits
    torch.testing.assert_close(after, model(ids).logits.detach(), atol=1e-5, rtol=0)
    assert not torch.allclose(after, fast)


def test_decode_weights_are_reused_until_a_parameter_changes():
    model = tiny()
    first = model.decode_weights()
    assert model.decode_weights() is first
    with torch.no_grad():
        model.blocks.layers[0].ffn.linear1.bias.add_(1.0)
    assert model.decode_weights() is not first

"""SequenceTagger: every preset and encoder; padding; weights; validation; learning a rule."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from qkv.models.registry import build_config, build_model
from qkv.models.tagger import PRESETS, SequenceTagger, SequenceTaggerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

V, K = 23, 5
ENCODERS = {
    "transformer": dict(encoder="transformer"),
    "transformer-sinusoidal": dict(encoder="transformer", positions="sinusoidal"),
    "bilstm": dict(encoder="bilstm"),
    "bilstm-self-attention": dict(encoder="bilstm", self_attention=True),
    "bigru": dict(encoder="bilstm", cell="gru", num_layers=2),
}
LENGTHS = [6, 3, 1, 5]


def tiny(encoder: str, **overrides) -> SequenceTagger:
    torch.manual_seed(0)
    values = {**ENCODERS[encoder], **overrides}
    return SequenceTagger(SequenceTaggerConfig.preset("tiny", V, K, **values)).eval()


def padded_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (len(LENGTHS), max(LENGTHS)), generator=gen)  # (B, T)
    keep = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]  # (B, T)
    return ids.masked_fill(~keep, 0), keep


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_gives_one_row_of_logits_per_position(preset: str):
    torch.manual_seed(0)
    model = SequenceTagger(SequenceTaggerConfig.preset(preset, V, K)).eval()
    ids, keep = padded_batch()
    with torch.no_grad():
        out = model(ids, keep=keep, need_weights=True)
    assert out.logits.shape == (4, 6, K) and torch.isfinite(out.logits).all()
    c = model.config.text
    layers = c.num_layers if c.encoder == "transformer" else int(c.self_attention)
    assert len(out.attentions) == layers
    assert all(a.shape == (4, c.num_heads, 6, 6) for a in out.attentions)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_a_sequence_alone_equals_the_same_sequence_in_a_padded_batch(encoder: str):
    model = tiny(encoder)
    ids, keep = padded_batch()
    with torch.no_grad():
        batched = model(ids, keep=keep).logits
        for row, n in enumerate(LENGTHS):
            alone = model(ids[row : row + 1, :n]).logits
            torch.testing.assert_close(alone[0], batched[row, :n], atol=1e-5, rtol=0)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_padded_tokens_change_no_real_position(encoder: str):
    model = tiny(encoder)
    ids, keep = padded_batch()
    other = ids.masked_fill(~keep, V - 1)  # any id may sit under padding
    with torch.no_grad():
        base, changed = model(ids, keep=keep).logits, model(other, keep=keep).logits
    torch.testing.assert_close(changed[keep], base[keep], atol=1e-6, rtol=0)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_need_weights_changes_no_logit_and_no_query_looks_at_padding(encoder: str):
    model = tiny(encoder)
    ids, keep = padded_batch()
    with torch.no_grad():
        plain = model(ids, keep=keep)
        weighted = model(ids, keep=keep, need_weights=True)
    assert plain.attentions is None
    torch.testing.assert_close(weighted.logits, plain.logits, atol=1e-5, rtol=0)
    for layer in weighted.attentions:  # (B, H, T, T)
        assert (layer.masked_select(~keep[:, None, None, :]) == 0).all()
        rows = layer.sum(-1)[keep[:, None, :].expand(-1, layer.size(1), -1)]
        torch.testing.assert_close(rows, torch.ones_like(rows))


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_every_parameter_gets_a_finite_gradient(encoder: str):
    model = tiny(encoder).train()
    ids, keep = padded_batch()
    tags = torch.randint(0, K, ids.shape).masked_fill(~keep, -100)
    logits = model(ids, keep=keep).logits
    F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    embed = model.encoder.embed if encoder.startswith("transformer") else model.encoder.rnn.embed
    assert embed.weight.grad[ids[keep]].abs().sum(-1).gt(0).all()  # every real token's row
    assert (embed.weight.grad[0] == 0).all()  # the padding row stays fixed


def test_the_registry_builds_a_tagger_from_plain_values():
    config = build_config("sequence_tagger", dict(vocab_size=V, num_tags=K, encoder="bilstm"))
    assert isinstance(build_model("sequence_tagger", config), SequenceTagger)
    assert SequenceTaggerConfig.PRESETS is PRESETS


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(num_tags=0), "num_tags must be a positive int, got 0"),
        (dict(encoder="cnn"), "encoder must be one of .*'cnn'"),
        (dict(d_model=10, num_heads=4), "d_model=10 is not divisible by num_heads=4"),
        (dict(encoder="bilstm", self_attention=True, d_model=10, num_heads=4), "d_model=10"),
        (dict(max_len=0), "max_len must be a positive int, got 0"),
        (dict(vocab_size=V, pad_id=-1), r"pad_id=-1 must lie in \[0, 23\)"),
    ],
)
def test_config_errors_name_the_bad_value(overrides, message):
    values = {"vocab_size": V, "num_tags": K, **overrides}
    with pytest.raises(ValueError, match=message):
        SequenceTaggerConfig.from_flat(values)


def test_input_errors_name_the_bad_value():
    model = tiny("bilstm")
    ids, keep = padded_batch()
    with pytest.raises(ValueError, match=r"token ids range over -1\.\."):
        model(ids.masked_fill(~keep, -1), keep=keep)
    with pytest.raises(
        ValueError, match=r"row 1 of keep is not right-padded.*\[0, 1, 1, 1, 0, 0\]"
    ):
        model(ids, keep=keep.roll(1, dims=1))


@pytest.mark.parametrize(("encoder", "steps"), [("transformer", 400), ("bilstm", 200)])
def test_learns_the_previous_token_mod_3(encoder: str, steps: int):
    # tag_t = ids_{t-1} mod 3, and tag 3 at the first position: the model must look one back.
    torch.manual_seed(0)
    model = SequenceTagger(SequenceTaggerConfig.preset("tiny", 16, 4, encoder=encoder))
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)

    def batch(size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        lengths = torch.randint(3, 11, (size,), generator=gen)
        ids = torch.randint(1, 16, (size, 10), generator=gen)
        keep = torch.arange(10)[None, :] < lengths[:, None]
        tags = torch.full((size, 10), 3)
        tags[:, 1:] = ids[:, :-1] % 3
        return ids.masked_fill(~keep, 0), keep, tags.masked_fill(~keep, -100)

    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids, keep, tags = batch(32, gen)
        logits = model(ids, keep=keep).logits
        loss = F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    ids, keep, tags = batch(256, torch.Generator().manual_seed(2))
    with torch.no_grad():
        predicted = model.eval()(ids, keep=keep).logits.argmax(-1)
    assert (predicted[keep] == tags[keep]).float().mean() > 0.95

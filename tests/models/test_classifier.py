"""EncoderClassifier: every preset, encoder and pooling; padding; weights; validation; learning."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from qkv.layers.pooling import POOLINGS, structured_penalty
from qkv.layers.text_encoder import TransformerTextEncoder
from qkv.models.classifier import PRESETS, EncoderClassifier, EncoderClassifierConfig
from qkv.models.registry import build_config, build_model, family_of

pytestmark = pytest.mark.usefixtures("one_thread")

V, K = 23, 3
ENCODERS = {
    "transformer": dict(encoder="transformer"),
    "transformer-sinusoidal": dict(encoder="transformer", positions="sinusoidal"),
    "bilstm": dict(encoder="bilstm"),
    "bigru-self-attention": dict(encoder="bilstm", cell="gru", self_attention=True),
}
LENGTHS = [6, 3, 1, 5]


def tiny(encoder: str, pooling: str, **overrides) -> EncoderClassifier:
    torch.manual_seed(0)
    values = {**ENCODERS[encoder], "pooling": pooling, "hops": 3, **overrides}
    return EncoderClassifier(EncoderClassifierConfig.preset("tiny", V, K, **values)).eval()


def padded_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (len(LENGTHS), max(LENGTHS)), generator=gen)  # (B, T)
    keep = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]  # (B, T)
    return ids.masked_fill(~keep, 0), keep


VARIANTS = [(encoder, pooling) for encoder in ENCODERS for pooling in POOLINGS]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_gives_logits_of_the_right_shape(preset: str):
    torch.manual_seed(0)
    model = EncoderClassifier(EncoderClassifierConfig.preset(preset, V, K)).eval()
    ids, keep = padded_batch()
    with torch.no_grad():
        out = model(ids, keep=keep, need_weights=True)
    assert out.logits.shape == (len(LENGTHS), K) and torch.isfinite(out.logits).all()
    c = model.config
    assert (out.penalty is not None) == (c.pooling == "structured")
    c = c.text  # the encoder's sizes
    if c.encoder == "transformer":
        assert len(out.attentions) == c.num_layers
        assert all(a.shape == (4, c.num_heads, 6, 6) for a in out.attentions)


@pytest.mark.parametrize(("encoder", "pooling"), VARIANTS)
def test_a_sequence_alone_equals_the_same_sequence_in_a_padded_batch(encoder, pooling):
    model = tiny(encoder, pooling)
    ids, keep = padded_batch()
    with torch.no_grad():
        batched = model(ids, keep=keep, need_weights=True)
        for row, n in enumerate(LENGTHS):
            alone = model(ids[row : row + 1, :n], need_weights=True)
            torch.testing.assert_close(alone.logits[0], batched.logits[row], atol=1e-5, rtol=0)
            if alone.pooling_weights is not None:
                got = batched.pooling_weights[row][..., :n]
                torch.testing.assert_close(alone.pooling_weights[0], got, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("encoder", "pooling"), VARIANTS)
def test_need_weights_changes_no_logit_and_padding_gets_no_weight(encoder, pooling):
    model = tiny(encoder, pooling)
    ids, keep = padded_batch()
    with torch.no_grad():
        plain = model(ids, keep=keep)
        weighted = model(ids, keep=keep, need_weights=True)
    assert plain.attentions is None and plain.pooling_weights is None
    torch.testing.assert_close(weighted.logits, plain.logits, atol=1e-5, rtol=0)
    if pooling in ("attention", "structured"):
        weights = weighted.pooling_weights.view(4, -1, 6)  # (B, 1 or r, T)
        assert (weights.masked_select(~keep[:, None, :]) == 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights[..., 0]))
    for layer in weighted.attentions:  # (B, H, T, T): no real query looks at padding
        assert (layer.masked_select(~keep[:, None, None, :]) == 0).all()


@pytest.mark.parametrize(("encoder", "pooling"), VARIANTS)
def test_every_parameter_gets_a_finite_gradient(encoder, pooling):
    model = tiny(encoder, pooling).train()
    ids, keep = padded_batch()
    out = model(ids, keep=keep)
    loss = F.cross_entropy(out.logits, torch.tensor([0, 1, 2, 1]))
    if out.penalty is not None:
        loss = loss + out.penalty
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    embed = model.encoder.embed if encoder.startswith("transformer") else model.encoder.rnn.embed
    assert embed.weight.grad[ids[keep]].abs().sum(-1).gt(0).all()  # every real token's row


def test_structured_penalty_is_lin_et_al_s_on_the_returned_weights():
    model = tiny("bilstm", "structured")
    ids, keep = padded_batch()
    with torch.no_grad():
        out = model(ids, keep=keep, need_weights=True)
    assert out.pooling_weights.shape == (4, 3, 6)
    torch.testing.assert_close(out.penalty, structured_penalty(out.pooling_weights))
    a = out.pooling_weights.double()
    eye = torch.eye(3, dtype=torch.float64)
    direct = torch.stack([torch.linalg.matrix_norm(x @ x.T - eye) ** 2 for x in a]).mean()
    torch.testing.assert_close(out.penalty.double(), direct, atol=1e-5, rtol=0)


def test_cls_pooling_reads_position_zero():
    model = tiny("transformer", "cls")
    ids, keep = padded_batch()
    with torch.no_grad():
        hidden = model.encoder(ids, keep=keep).hidden
        expected = model.output_proj(hidden[:, 0])
        torch.testing.assert_close(model(ids, keep=keep).logits, expected)


def test_dropout_is_off_in_eval_mode():
    model = tiny("bigru-self-attention", "attention", dropout=0.5)
    ids, keep = padded_batch()
    with torch.no_grad():
        assert torch.equal(model(ids, keep=keep).logits, model(ids, keep=keep).logits)
        model.train()
        assert not torch.equal(model(ids, keep=keep).logits, model(ids, keep=keep).logits)


def test_a_ready_made_encoder_can_replace_the_built_one():
    class Wrapped(nn.Module):  # the call of a pretrained BERT: .hidden and .attentions
        def __init__(self) -> None:
            super().__init__()
            config = EncoderClassifierConfig.preset("tiny", V, K).text
            self.inner = TransformerTextEncoder(config)

        def forward(self, ids, *, keep=None, need_weights=False):
            out = self.inner(ids, keep=keep, need_weights=need_weights)
            return SimpleNamespace(hidden=out.hidden, attentions=out.attentions or None)

    config = EncoderClassifierConfig.preset("tiny", V, K, pooling="attention")
    model = EncoderClassifier(config, encoder=Wrapped(), encoder_dim=32).eval()
    ids, keep = padded_batch()
    out = model(ids, keep=keep, need_weights=True)
    assert out.logits.shape == (4, K) and len(out.attentions) == 1
    assert isinstance(model.encoder, Wrapped)
    with pytest.raises(ValueError, match=r"pass encoder_dim.*Wrapped.*output_dim=None"):
        EncoderClassifier(config, encoder=Wrapped())


def test_the_registry_builds_both_families_from_plain_values():
    config = build_config(
        "encoder_classifier", dict(vocab_size=V, num_labels=K, d_model=16, num_heads=2)
    )
    model = build_model("encoder_classifier", config)
    assert isinstance(model, EncoderClassifier) and family_of(config) == "encoder_classifier"
    with pytest.raises(ValueError, match="pooling"):
        build_config("encoder_classifier", dict(vocab_size=V, num_labels=K, poolin="mean"))
    assert EncoderClassifierConfig.PRESETS is PRESETS


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(encoder="gru"), "encoder must be one of .*'gru'"),
        (dict(pooling="sum"), "pooling must be one of .*'sum'"),
        (dict(d_model=30, num_heads=4), "d_model=30 is not divisible by num_heads=4"),
        (dict(encoder="bilstm", d_model=33, num_heads=1), "even d_model.*d_model=33"),
        (dict(self_attention=True), "self_attention=True.*encoder='transformer'"),
        (dict(hops=0), "hops must be a positive int, got 0"),
        (dict(num_labels=0), "num_labels must be a positive int, got 0"),
        (dict(positions="rotary"), "positions must be one of .*'rotary'"),
        (dict(cell="rnn"), "cell must be one of .*'rnn'"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
        (dict(pad_id=V), f"pad_id={V} must lie in \\[0, {V}\\)"),
    ],
)
def test_config_errors_name_the_bad_value(overrides, message):
    values = {"vocab_size": V, "num_labels": K, **overrides}
    with pytest.raises(ValueError, match=message):
        EncoderClassifierConfig.from_flat(values)


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match=r"'huge'.*tiny, transformer-small, bilstm-attention"):
        EncoderClassifierConfig.preset("huge", V, K)


@pytest.mark.parametrize("encoder", ["transformer", "bilstm"])
def test_input_errors_name_the_bad_value(encoder):
    model = tiny(encoder, "mean")
    ids, keep = padded_batch()
    with pytest.raises(ValueError, match=f"token ids range over 0..{V}, outside \\[0, {V}\\)"):
        model(ids.masked_fill(ids == ids[0, 0], V), keep=keep)
    with pytest.raises(ValueError, match="sequence of length 65 exceeds max_len=64"):
        model(torch.ones(1, 65, dtype=torch.long))
    left = keep.flip(1)  # left padding
    with pytest.raises(
        ValueError, match=r"row 1 of keep is not right-padded.*\[0, 0, 0, 1, 1, 1\]"
    ):
        model(ids, keep=left)
    empty = keep.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="row 2 of keep has no real token"):
        model(ids, keep=empty)
    with pytest.raises(ValueError, match=r"keep must be a boolean keep-mask.*torch\.int64"):
        model(ids, keep=keep.long())
    with pytest.raises(ValueError, match=r"keep must be a boolean \(B, T\) = \(4, 6\)"):
        model(ids, keep=keep[:, :5])
    with pytest.raises(ValueError, match=r"empty input: ids has shape \(4, 0\)"):
        model(ids[:, :0])
    with pytest.raises(ValueError, match=r"\(B, T\) integer tensor.*\(6,\)"):
        model(ids[0])


@pytest.mark.parametrize(
    ("encoder", "pooling"), [("transformer", "attention"), ("bilstm", "structured")]
)
def test_learns_whether_token_7_occurs(encoder, pooling):
    torch.manual_seed(0)
    config = EncoderClassifierConfig.preset("tiny", 16, 2, **ENCODERS[encoder], pooling=pooling)
    penalty_weight = 0.1  # the task's train.penalty_weight
    model = EncoderClassifier(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)

    def batch(size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        lengths = torch.randint(3, 11, (size,), generator=gen)
        ids = torch.randint(1, 16, (size, 10), generator=gen)
        ids[ids == 7] = 8  # token 7 in about half the rows, at a random real position
        plant = torch.rand(size, generator=gen) < 0.5
        where = (torch.rand(size, generator=gen) * lengths).long()
        ids[plant, where[plant]] = 7
        keep = torch.arange(10)[None, :] < lengths[:, None]
        return ids.masked_fill(~keep, 0), keep, plant.long()

    gen = torch.Generator().manual_seed(1)
    for _ in range(150):
        ids, keep, labels = batch(32, gen)
        out = model(ids, keep=keep)
        loss = F.cross_entropy(out.logits, labels)
        if out.penalty is not None:
            loss = loss + penalty_weight * out.penalty
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    ids, keep, labels = batch(256, torch.Generator().manual_seed(2))
    with torch.no_grad():
        accuracy = (model.eval()(ids, keep=keep).logits.argmax(-1) == labels).float().mean()
    assert accuracy > 0.95

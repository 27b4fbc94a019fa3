"""Show, Attend and Tell: the first decoder step against a hand-written float64 computation
(mean-region initialisation, additive score, masked softmax, gated context, LSTM gates, deep
output), the region layout (column j lies on tile j // Gw), padding that changes nothing and
gets exactly zero weight, greedy captions (qkv.decoding.greedy_search) that agree with teacher
forcing and with their batch, hard attention (argmax in eval, the REINFORCE baseline buffer),
and bad inputs named."""

from __future__ import annotations

import math

import pytest
import torch

from qkv.models.registry import build_config, build_model, config_to_dict, family_of
from qkv.models.show_attend_tell.model import PRESETS, ShowAttendTell, ShowAttendTellConfig
from tests.models.captions import greedy_captions

pytestmark = pytest.mark.usefixtures("one_thread")

TILE = 12  # tiny preset: two blocks, stride 4, 3 x 3 regions per tile
V = 9


def tiny(attention: str = "soft", **overrides) -> ShowAttendTell:
    torch.manual_seed(0)
    config = ShowAttendTellConfig.preset(
        "tiny", V, tile_height=TILE, tile_width=TILE, attention=attention, **overrides
    )
    model = ShowAttendTell(config)
    with torch.no_grad():  # zero biases and unit norms hide mistakes: perturb everything
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.8, 1.2)
    return model.eval()


def strips(b: int = 2, tiles: int = 3, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(b, 1, TILE, TILE * tiles, generator=generator)


def region_keep(counts: list[int], tiles: int) -> torch.Tensor:
    """``(B, 3, 3 tiles)``: True over the first ``counts[b]`` tiles."""
    columns = torch.arange(3 * tiles)[None, :] < 3 * torch.tensor(counts)[:, None]
    return columns[:, None, :].expand(-1, 3, -1)


def test_presets_and_registry():
    assert set(PRESETS) >= {"mnist-soft", "mnist-hard", "tiny"}
    config = ShowAttendTellConfig.preset("mnist-hard", 13)
    assert config.attention == "hard" and config.regions_per_tile == (7, 7)
    assert config.stride == 4
    saved = config_to_dict(config)
    saved["conv_channels"] = list(saved["conv_channels"])  # as JSON gives it back
    rebuilt = build_config("show_attend_tell", saved)
    assert rebuilt == config and family_of(rebuilt) == "show_attend_tell"
    assert isinstance(build_model("show_attend_tell", rebuilt), ShowAttendTell)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"tile_height": 30}, "multiple of the encoder's stride 4"),
        ({"attention": "sharp"}, "attention must be one of"),
        ({"dropout": 1.0}, "dropout"),
        ({"vocab_size": 3}, "vocab_size must be >= 4"),
        ({"conv_channels": ()}, "conv_channels"),
        ({"baseline_decay": 1.5}, "baseline_decay"),
    ],
)
def test_bad_configs_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        ShowAttendTellConfig(**overrides)


def test_first_step_equals_a_float64_hand_computation():
    model = tiny().double()
    images = strips().double()
    keep = region_keep([3, 2], 3)  # the second strip's last tile is padding
    captions = torch.tensor([[1, 4, 5], [1, 6, 2]])
    out = model(images, keep, captions)
    enc = model.encode(images, keep)
    a, real = enc.regions, enc.keep[:, 0]  # (B, R, D), (B, R)
    mean = (a * real[..., None]).sum(1) / real.sum(1, keepdim=True)
    h0 = torch.tanh(mean @ model.init_h.weight.T + model.init_h.bias)
    c0 = torch.tanh(mean @ model.init_c.weight.T + model.init_c.bias)
    s = model.score
    hidden = (h0 @ s.query_proj.weight.T)[:, None, :] + a @ s.key_proj.weight.T + s.key_proj.bias
    energies = torch.tanh(hidden) @ s.v.weight[0]  # (B, R): v^T tanh(W h + U a + b)
    alpha = energies.masked_fill(~real, -math.inf).softmax(-1)
    beta = torch.sigmoid(h0 @ model.gate.weight.T + model.gate.bias)
    z = beta * (alpha[..., None] * a).sum(1)  # (B, D)
    e = model.embed.weight[captions[:, 0]]
    x = torch.cat([e, z], -1)
    gates = x @ model.lstm.weight_ih.T + model.lstm.bias_ih
    gates = gates + h0 @ model.lstm.weight_hh.T + model.lstm.bias_hh
    i, f, g, o = gates.chunk(4, -1)
    c1 = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    h1 = torch.sigmoid(o) * torch.tanh(c1)
    deep = e + h1 @ model.out_h.weight.T + model.out_h.bias + z @ model.out_z.weight.T
    logits = (deep + model.out_z.bias) @ model.output.weight.T + model.output.bias
    torch.testing.assert_close(out.weights[:, 0], alpha, atol=1e-12, rtol=0)
    torch.testing.assert_close(out.logits[:, 0], logits, atol=1e-12, rtol=0)
    assert (out.weights[1, :, ~real[1]] == 0).all()  # padded regions: exactly zero weight
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 3, dtype=torch.float64))


def test_regions_are_laid_out_tile_by_tile_row_major():
    model = tiny()
    images = strips(b=1, tiles=3)
    with torch.no_grad():
        whole = model.encode(images).regions.view(1, 3, 9, -1)  # (B, Gh, n Gw, D)
        for k in range(3):
            alone = model.encode(images[..., k * TILE : (k + 1) * TILE]).regions.view(1, 3, 3, -1)
            shift = model.tile_position.encoding(torch.tensor([k, 0]))  # tile k vs tile 0
            expected = alone + shift[0] - shift[1]
            torch.testing.assert_close(whole[:, :, 3 * k : 3 * k + 3], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_padding_a_strip_changes_nothing(attention):
    model = tiny(attention)
    short = strips(b=1, tiles=2, seed=3)
    captions = torch.tensor([[1, 5, 6]])
    with torch.no_grad():
        alone = model(short, None, captions)
        garbage = torch.full((1, 1, TILE, 2 * TILE), 1e4)  # huge pixels in the padded tiles
        padded = torch.cat([short, garbage], dim=-1)
        other = strips(b=1, tiles=4, seed=4)
        batch = model(torch.cat([padded, other]), region_keep([2, 4], 4), captions.repeat(2, 1))
    torch.testing.assert_close(batch.logits[:1], alone.logits, atol=1e-5, rtol=0)
    weights = batch.weights[0].view(3, 3, 12)  # (T, Gh, 4 Gw)
    torch.testing.assert_close(weights[..., :6], alone.weights.view(3, 3, 6), atol=1e-5, rtol=0)
    assert (weights[..., 6:] == 0).all()


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_greedy_generation_agrees_with_teacher_forcing_and_its_batch(attention):
    model = tiny(attention)
    images = strips(b=3, tiles=2, seed=5)
    generated = greedy_captions(model, images, None, max_len=4, bos=1, eos=2)
    assert generated.ids.shape[1] == generated.attention.shape[1] <= 5
    for row in range(3):
        length = int(generated.lengths[row])
        steps = min(length + 1, generated.ids.size(1))  # the words and <eos> (if it came)
        ids = generated.ids[row, :steps]
        with torch.no_grad():
            forced = model(
                images[row : row + 1], None, torch.cat([torch.tensor([1]), ids[:-1]])[None]
            )
        free = min(steps, 4)  # step 4 (max_len) may only say <eos>
        words = forced.logits[0, :free, 2:].argmax(-1) + 2  # <pad> and <bos> are never said
        assert torch.equal(words, ids[:free])
        torch.testing.assert_close(forced.weights[0], generated.attention[row, :steps])
        alone = greedy_captions(model, images[row : row + 1], None, max_len=4, bos=1, eos=2)
        assert int(alone.lengths[0]) == length
        assert torch.equal(alone.ids[0, :steps], ids)


def test_generation_never_says_pad_or_bos():
    model = tiny()
    with torch.no_grad():
        model.output.bias[:2] = 100.0  # <pad> and <bos> are by far the most likely
    generated = greedy_captions(model, strips(b=2), None, max_len=3, bos=1, eos=2)
    assert (generated.ids >= 2).all()


def test_generation_stops_at_max_len_with_eos():
    model = tiny()
    with torch.no_grad():
        model.output.bias[2] = -100.0  # <eos> is never chosen on its own
    generated = greedy_captions(model, strips(b=2), None, max_len=3, bos=1, eos=2)
    assert generated.lengths.tolist() == [3, 3]
    assert generated.ids.shape == (2, 4) and (generated.ids[:, 3] == 2).all()


def test_hard_attention_takes_the_argmax_in_eval_and_samples_in_training():
    model = tiny("hard")
    images, captions = strips(b=4, seed=6), torch.tensor([[1, 3, 4, 5]]).repeat(4, 1)
    with torch.no_grad():
        first = model(images, None, captions)
        second = model(images, None, captions)
    assert torch.equal(first.logits, second.logits)
    assert torch.equal(first.choices, first.weights.argmax(-1))
    torch.testing.assert_close(first.weights.sum(-1), torch.ones(4, 4))
    model.train()
    torch.manual_seed(0)
    sampled = model(images, None, captions)
    assert sampled.log_probs.shape == sampled.entropies.shape == (4, 4)
    chosen = sampled.weights.gather(-1, sampled.choices[..., None])[..., 0]
    torch.testing.assert_close(sampled.log_probs, chosen.log(), atol=1e-5, rtol=0)
    entropy = -(sampled.weights * sampled.weights.clamp_min(1e-30).log()).sum(-1)
    torch.testing.assert_close(sampled.entropies, entropy, atol=1e-5, rtol=0)
    # Strips told to use the expected context get no REINFORCE term.
    expected = torch.tensor([True, False, True, False])
    mixed = model(images, None, captions, expected=expected)
    assert (mixed.log_probs[expected] == 0).all() and (mixed.log_probs[~expected] < 0).all()


def test_every_parameter_gets_a_gradient():
    for attention in ("soft", "hard"):
        model = tiny(attention).train()
        out = model(strips(b=3), region_keep([3, 2, 1], 3), torch.tensor([[1, 3, 4]] * 3))
        loss = out.logits.logsumexp(-1).sum()
        if attention == "hard":
            loss = loss + out.log_probs.sum() + out.entropies.sum()
        loss.backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
        assert not missing, f"{attention}: no gradient for {missing}"
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_reinforce_baseline_is_a_moving_average_in_a_buffer():
    model = tiny("hard", baseline_decay=0.9)
    assert {"baseline", "baseline_updates"} <= set(model.state_dict())
    assert float(model.update_baseline(torch.tensor([-4.0, -2.0]))) == -3.0  # first: the mean
    assert float(model.update_baseline(torch.tensor([-1.0]))) == pytest.approx(-3.0)
    assert float(model.baseline) == pytest.approx(0.9 * -3.0 + 0.1 * -1.0)
    assert int(model.baseline_updates) == 2


def test_bad_inputs_are_named():
    model = tiny()
    captions = torch.tensor([[1, 3]])
    with pytest.raises(ValueError, match=r"\(1, 2, 12, 24\).*expected \(B >= 1, 1, 12, n \* 12\)"):
        model(torch.rand(1, 2, TILE, 2 * TILE), None, captions)
    with pytest.raises(ValueError, match="width 30 is not a multiple of the tile width 12"):
        model(torch.rand(1, 1, TILE, 30), None, captions)
    with pytest.raises(ValueError, match=r"keep must be a bool tensor .* \(1, 3, 6\)"):
        model(strips(b=1, tiles=2), torch.ones(1, 3, 5, dtype=torch.bool), captions)
    ragged = region_keep([2], 2).clone()
    ragged[0, 0, 4] = False
    with pytest.raises(ValueError, match="constant over the regions of each tile"):
        model(strips(b=1, tiles=2), ragged, captions)
    with pytest.raises(ValueError, match=r"caption ids must lie in \[0, 9\), got \[1, 9\]"):
        model(strips(b=1, tiles=2), None, torch.tensor([[1, 9]]))
    with pytest.raises(ValueError, match="float tensor"):
        model(strips(b=1).to(torch.uint8), None, captions)

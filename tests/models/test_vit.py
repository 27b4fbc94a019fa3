"""ViT: shapes for the presets and patch sizes, the patch embedding against an explicit
flatten-and-project, weights that change nothing, position interpolation (identity at the
configured size, bicubic elsewhere with [CLS] kept), dropout, gradients, and bad configs and
inputs named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from qkv.models.registry import build_config, build_model, family_of
from qkv.models.vit import PRESETS, ViT, ViTConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(**overrides) -> ViT:
    torch.manual_seed(0)
    model = ViT(ViTConfig.preset("tiny", **overrides)).eval()
    with torch.no_grad():  # zero [CLS], zero biases and unit norms hide mistakes: perturb all
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


@pytest.mark.parametrize(
    "name, overrides, side, channels, patches",
    [
        ("tiny", {}, 16, 3, 16),
        ("tiny-mnist", {}, 28, 1, 16),  # patch 7: a 4 x 4 grid
        ("tiny-mnist", {"patch_size": 4}, 28, 1, 49),  # a 7 x 7 grid
        # ViT-B/16's geometry (224 / 16 = 14 x 14 patches) at a tiny width.
        (
            "vit-b16",
            dict(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32),
            224,
            3,
            196,
        ),
    ],
)
def test_shapes_for_presets_and_patch_sizes(name, overrides, side, channels, patches):
    torch.manual_seed(0)
    config = ViTConfig.preset(name, **overrides)
    model = ViT(config).eval()
    with torch.no_grad():
        out = model(torch.randn(2, channels, side, side), need_weights=True)
    d, heads = config.hidden_size, config.num_heads
    assert out.logits.shape == (2, config.num_labels)
    assert out.hidden.shape == (2, 1 + patches, d)
    assert len(out.attentions) == config.num_layers
    assert all(w.shape == (2, heads, 1 + patches, 1 + patches) for w in out.attentions)
    assert model.position_embeddings.shape == (1, 1 + patches, d)


def test_vit_b16_preset_is_the_papers_base_model():
    config = ViTConfig.preset("vit-b16")
    assert (config.image_size, config.patch_size, config.hidden_size) == (224, 16, 768)
    assert (config.num_layers, config.num_heads, config.intermediate_size) == (12, 12, 3072)
    assert config.num_patches == 196 and set(PRESETS) >= {"vit-b16", "tiny-mnist", "tiny"}


def test_patch_embedding_is_a_linear_map_of_flattened_patches():
    model = tiny()
    images = torch.randn(2, 3, 16, 16)
    # Cut into 4 x 4 patches by hand, flatten each (C, p, p) row-major and project with E.
    patches = images.unfold(2, 4, 4).unfold(3, 4, 4)  # (B, C, 4, 4, p, p)
    patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(2, 16, 3 * 16)  # (B, P, C p^2)
    weight = model.patch_embed.weight.reshape(32, -1)  # (D, C p^2)
    expected = patches @ weight.T + model.patch_embed.bias  # (B, P, D)
    expected = torch.cat([model.cls_token.expand(2, -1, -1), expected], 1)
    expected = expected + model.position_embeddings
    torch.testing.assert_close(model.embed(images), expected, atol=1e-5, rtol=0)


def test_need_weights_changes_nothing_and_rows_sum_to_one():
    model = tiny()
    images = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        plain = model(images)
        weighted = model(images, need_weights=True)
    assert plain.attentions is None
    torch.testing.assert_close(weighted.logits, plain.logits, atol=1e-6, rtol=0)
    torch.testing.assert_close(weighted.hidden, plain.hidden, atol=1e-6, rtol=0)
    for w in weighted.attentions:
        assert torch.all(w >= 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 17))


def test_an_image_alone_equals_it_in_a_batch():
    model = tiny()
    images = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        batched = model(images).logits
        alone = model(images[1:2]).logits
    torch.testing.assert_close(alone, batched[1:2], atol=1e-5, rtol=0)


def test_position_interpolation_is_the_identity_at_the_configured_size():
    model = tiny()
    assert model.position_table(4, 4) is model.position_embeddings
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        # The table by hand: no interpolation path is taken, so the sum is bit-equal.
        patches = model.patch_embed(images).flatten(2).transpose(1, 2)
        by_hand = torch.cat([model.cls_token.expand(2, -1, -1), patches], 1)
        by_hand = by_hand + model.position_embeddings
        assert torch.equal(model.embed(images), by_hand)


def test_position_interpolation_at_another_size_keeps_cls_and_resizes_the_grid():
    model = tiny()
    table = model.position_table(6, 3)  # a 24 x 12 image: 6 x 3 patches
    assert table.shape == (1, 1 + 18, 32)
    assert torch.equal(table[:, 0], model.position_embeddings[:, 0])  # [CLS] kept
    # An independent reference: the grid resized by torch's bicubic, channel by channel.
    grid = model.position_embeddings[0, 1:].reshape(4, 4, 32)
    for channel in (0, 7, 31):
        image = grid[None, None, :, :, channel]
        resized = F.interpolate(image, size=(6, 3), mode="bicubic", align_corners=False)
        torch.testing.assert_close(table[0, 1:, channel], resized.flatten(), atol=1e-6, rtol=0)
    # A constant table stays constant: interpolation neither shifts nor scales it.
    with torch.no_grad():
        model.position_embeddings[:, 1:] = 0.25
    assert torch.allclose(model.position_table(8, 8)[:, 1:], torch.tensor(0.25), atol=1e-6)
    with torch.no_grad():
        out = model(torch.randn(2, 3, 24, 12), need_weights=True)
    assert out.hidden.shape == (2, 19, 32) and torch.isfinite(out.logits).all()
    assert out.attentions[0].shape == (2, 4, 19, 19)


def test_dropout_is_off_in_eval_and_on_in_training():
    model = tiny(dropout=0.3, attention_dropout=0.3)
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(images).logits, model(images).logits)
        model.train()
        torch.manual_seed(1)
        first = model(images).logits
        torch.manual_seed(2)
        assert not torch.equal(first, model(images).logits)


def test_every_parameter_gets_a_finite_gradient_at_two_sizes():
    for side in (16, 20):  # 20: through the interpolated position table
        model = tiny().train()
        model(torch.randn(2, 3, side, side)).logits.logsumexp(-1).sum().backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
            assert p.grad.abs().sum() > 0, name


def test_no_head_gives_no_logits():
    model = tiny(num_labels=0)
    assert model.head is None
    out = model(torch.randn(1, 3, 16, 16))
    assert out.logits is None and out.hidden.shape == (1, 17, 32)


def test_registered_as_a_family():
    config = build_config("vit", dict(PRESETS["tiny"]))
    assert family_of(config) == "vit" and isinstance(build_model("vit", config), ViT)
    with pytest.raises(ValueError, match="patch_sze \\(did you mean patch_size\\?\\)"):
        build_config("vit", {"patch_sze": 4})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"patch_size": 5}, "patch_size=5 does not divide image_size=16"),
        ({"image_size": 0}, "image_size must be a positive int, got 0"),
        ({"num_channels": 2.0}, "num_channels must be a positive int, got 2.0"),
        ({"num_heads": 5}, "hidden_size=32 is not divisible by num_heads=5"),
        ({"num_labels": -1}, "num_labels must be an int >= 0 .*got -1"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"attention_dropout": -0.1}, r"attention_dropout must be in \[0, 1\), got -0.1"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0, got 0.0"),
        ({"activation": "relu"}, "activation must be 'gelu' or 'gelu_tanh', got 'relu'"),
    ],
)
def test_config_errors_name_the_value(overrides, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig.preset("tiny", **overrides)
    with pytest.raises(ValueError, match="unknown preset 'vit-h14'; known: vit-b16"):
        ViTConfig.preset("vit-h14")


@pytest.mark.parametrize(
    "images, message",
    [
        (torch.randn(2, 1, 16, 16), r"1 channel\(s\), this model takes num_channels=3"),
        (torch.randn(2, 3, 18, 16), "image size 18x16 is not a positive multiple of patch_size=4"),
        (torch.randn(2, 3, 16, 14), "image size 16x14 is not a positive multiple of patch_size=4"),
        (torch.randn(3, 16, 16), r"\(B, C, H, W\) with B >= 1, got shape \(3, 16, 16\)"),
        (torch.randn(0, 3, 16, 16), r"got shape \(0, 3, 16, 16\)"),
        (torch.zeros(1, 3, 16, 16, dtype=torch.long), "floating point, got dtype torch.int64"),
    ],
)
def test_bad_inputs_are_named(images, message):
    with pytest.raises(ValueError, match=message):
        tiny()(images)

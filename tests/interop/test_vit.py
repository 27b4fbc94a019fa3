"""qkv's ViT is Hugging Face's ViT: randomly initialised ``ViTForImageClassification`` and
``ViTModel``s, their weights imported (live or from a saved folder), give the same logits, final
hidden states and attention weights (1e-5), and the same outputs at another image size with
``interpolate_pos_encoding=True``; bad folders, foreign tensors and unsupported configs are
named."""

from __future__ import annotations

import json
import os

import pytest
import torch

from qkv.interop.vit import ViTImportError, from_hf_vit, load_vit, vit_config, vit_state_dict

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

CONFIGS = {
    "rgb": dict(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
    ),
    "gray+gelu_new": dict(
        image_size=28,
        patch_size=7,
        num_channels=1,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        hidden_act="gelu_new",
        layer_norm_eps=1e-6,
    ),
}

pytestmark = pytest.mark.usefixtures("one_thread")


def hf_config(name: str, **overrides):
    return transformers.ViTConfig(**{**CONFIGS[name], **overrides})


def perturbed(model):
    torch.manual_seed(1)
    with torch.no_grad():  # HF zero-initialises biases and unit-initialises norms: perturb all
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def classifier(name: str, labels: int = 5, **overrides):
    torch.manual_seed(0)
    config = hf_config(name, num_labels=labels, attn_implementation="eager", **overrides)
    return perturbed(transformers.ViTForImageClassification(config))


def bare(name: str, **overrides):
    torch.manual_seed(0)
    config = hf_config(name, attn_implementation="eager", **overrides)
    return perturbed(transformers.ViTModel(config))


def images(name: str, batch: int = 3, height: int | None = None, width: int | None = None):
    torch.manual_seed(2)
    c = CONFIGS[name]
    side = c["image_size"]
    return torch.randn(batch, c["num_channels"], height or side, width or side)


def close(got, expected):
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_classifier_logits_hidden_and_attentions_equal_hugging_face(name):
    hf = classifier(name)
    ours = from_hf_vit(hf)
    assert ours.config.num_labels == 5
    x = images(name)
    with torch.no_grad():
        expected = hf(x, output_attentions=True, output_hidden_states=True)
        got = ours(x, need_weights=True)
        # HF's classifier reads the [CLS] state after the final layernorm; so does qkv's head.
        theirs_hidden = hf.vit(x).last_hidden_state
    close(got.logits, expected.logits)
    close(got.hidden, theirs_hidden)
    assert len(got.attentions) == len(expected.attentions) == 2
    for mine, theirs in zip(got.attentions, expected.attentions, strict=True):
        close(mine, theirs)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_bare_model_imports_without_its_pooler(name, caplog):
    hf = bare(name)
    assert "pooler.dense.weight" in hf.state_dict()
    with caplog.at_level("INFO", logger="qkv.interop.vit"):
        ours = from_hf_vit(hf)
    assert "pooler" in caplog.text
    assert ours.config.num_labels == 0 and ours.head is None
    x = images(name)
    with torch.no_grad():
        expected = hf(x)
        got = ours(x)
    assert got.logits is None
    # last_hidden_state is after ViTModel's final layernorm, as qkv's hidden is.
    close(got.hidden, expected.last_hidden_state)


@pytest.mark.parametrize("height, width", [(48, 48), (40, 24), (16, 32)])
def test_interpolated_positions_equal_hugging_faces(height, width):
    # HF's interpolate_pos_encoding is the same bicubic (align_corners=False) resize of the patch
    # grid with [CLS] kept, so both agree at any size, smaller, larger or non-square.
    hf = classifier("rgb")
    ours = from_hf_vit(hf)
    x = images("rgb", 2, height, width)
    with torch.no_grad():
        expected = hf(x, interpolate_pos_encoding=True, output_attentions=True)
        got = ours(x, need_weights=True)
    close(got.logits, expected.logits)
    close(got.attentions[-1], expected.attentions[-1])
    hf_bare = bare("rgb")
    with torch.no_grad():
        expected = hf_bare(x, interpolate_pos_encoding=True).last_hidden_state
        got = from_hf_vit(hf_bare)(x).hidden
    assert got.shape == (2, 1 + (height // 8) * (width // 8), 64)
    close(got, expected)


def test_both_layer_layouts_are_read():
    hf = classifier("rgb")
    live = dict(hf.state_dict())  # transformers 5 module names: vit.layers.0.attention.q_proj
    assert any(".layers.0.attention.q_proj." in k for k in live)
    config = vit_config(hf.config.to_dict())
    from_live = vit_state_dict(live, config)
    # The file layout (what save_pretrained writes and hub checkpoints hold), renamed by hand.
    renames = {
        "vit.layers.": "vit.encoder.layer.",
        ".attention.q_proj.": ".attention.attention.query.",
        ".attention.k_proj.": ".attention.attention.key.",
        ".attention.v_proj.": ".attention.attention.value.",
        ".attention.o_proj.": ".attention.output.dense.",
        ".mlp.fc1.": ".intermediate.dense.",
        ".mlp.fc2.": ".output.dense.",
    }
    filed = {}
    for key, tensor in live.items():
        for old, new in renames.items():
            key = key.replace(old, new)
        filed[key] = tensor
    from_file = vit_state_dict(filed, config)
    assert from_file.keys() == from_live.keys()
    assert all(torch.equal(from_file[k], from_live[k]) for k in from_live)


def test_a_saved_folder_loads_without_transformers_and_corruption_is_named(tmp_path):
    hf = classifier("gray+gelu_new", labels=3)
    folder = tmp_path / "vit"
    hf.save_pretrained(folder, safe_serialization=True)
    ours = load_vit(folder)
    assert ours.config.activation == "gelu_tanh" and ours.config.layer_norm_eps == 1e-6
    assert ours.config.num_channels == 1 and ours.config.num_labels == 3
    x = images("gray+gelu_new")
    with torch.no_grad():
        close(ours(x).logits, hf(x).logits)

    bare_folder = tmp_path / "bare"
    hf_bare = bare("rgb")
    hf_bare.save_pretrained(bare_folder, safe_serialization=True)
    x = images("rgb")
    with torch.no_grad():
        close(load_vit(bare_folder)(x).hidden, hf_bare(x).last_hidden_state)

    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ViTImportError, match=r"model\.safetensors cannot be read"):
        load_vit(folder)
    with pytest.raises(ViTImportError, match=r"has no config\.json"):
        load_vit(tmp_path)
    with pytest.raises(ViTImportError, match="no model folder at"):
        load_vit(tmp_path / "missing")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ViTImportError, match=r"config\.json: Expecting"):
        load_vit(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ViTImportError, match="holds a 'bert' model, not vit"):
        load_vit(folder)


def test_missing_unexpected_and_mis_shaped_tensors_are_listed():
    hf = classifier("rgb")
    config = vit_config(hf.config.to_dict())
    state = dict(hf.state_dict())
    missing = {k: v for k, v in state.items() if not k.startswith("classifier.")}
    with pytest.raises(ViTImportError, match=r"lack 2 tensor\(s\): classifier.bias, classifier"):
        vit_state_dict(missing, config)
    mask_token = {**state, "vit.embeddings.mask_token": torch.zeros(1, 1, 64)}
    with pytest.raises(ViTImportError, match=r"unexpected .*mask token.*embeddings\.mask_token"):
        vit_state_dict(mask_token, config)
    fewer_layers = vit_config({**hf.config.to_dict(), "num_hidden_layers": 1})
    with pytest.raises(ViTImportError, match=r"num_hidden_layers=1\): vit\.layers\.1\."):
        vit_state_dict(state, fewer_layers)
    # A table of 1 + 4 positions where the config (32 / 8 = 4 x 4 patches) needs 1 + 16.
    hf.vit.embeddings.position_embeddings = torch.nn.Parameter(torch.zeros(1, 5, 64))
    with pytest.raises(ViTImportError, match=r"position_embeddings: .*\(1, 5, 64\).*\(1, 17, 64\)"):
        from_hf_vit(hf)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("qkv_bias", False, "qkv_bias=False is not supported"),
        ("use_mask_token", True, "use_mask_token=True is not supported"),
        ("hidden_act", "relu", "hidden_act='relu' is not supported; known: gelu"),
        ("image_size", [32, 48], r"image_size=\[32, 48\] is not supported \(only square\)"),
        ("patch_size", 7, "patch_size=7 does not divide image_size=32"),
        ("num_attention_heads", 5, "hidden_size=64 is not divisible by num_heads=5"),
    ],
)
def test_unsupported_configs_are_named(key, value, message):
    with pytest.raises(ViTImportError, match=message):
        vit_config({**CONFIGS["rgb"], key: value})


def test_a_config_without_sizes_is_named_and_square_pairs_are_read():
    with pytest.raises(ViTImportError, match="lacks 'hidden_size'"):
        vit_config({k: v for k, v in CONFIGS["rgb"].items() if k != "hidden_size"})
    config = vit_config({**CONFIGS["rgb"], "image_size": [32, 32], "patch_size": (8, 8)})
    assert (config.image_size, config.patch_size, config.num_labels) == (32, 8, 0)

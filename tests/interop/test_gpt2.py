"""qkv's TransformerLM is GPT-2: a randomly initialised Hugging Face GPT2LMHeadModel, its weights
imported, gives the same logits (1e-5) and the same greedy tokens as its own generate()."""

from __future__ import annotations

import os

import pytest
import torch

from qkv.decoding.sampling import SamplingConfig, generate
from qkv.interop.gpt2 import GPT2ImportError, from_hf_gpt2, gpt2_config, load_gpt2

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

CONFIGS = {
    "gelu_new": dict(n_embd=64, n_layer=3, n_head=4, n_positions=48, vocab_size=97),
    "n_inner+gelu": dict(
        n_embd=48,
        n_layer=2,
        n_head=3,
        n_positions=40,
        vocab_size=61,
        n_inner=80,
        activation_function="gelu",
        layer_norm_epsilon=1e-6,
    ),
}


def hf_model(name: str):
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        **CONFIGS[name],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # HF zero-initialises biases and unit-initialises norms: perturb all
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_equal_hugging_face(name):
    hf = hf_model(name)
    ours = from_hf_gpt2(hf)
    ids = torch.randint(0, hf.config.vocab_size, (3, 17))
    with torch.no_grad():
        expected = hf(ids).logits
        got = ours(ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_left_padded_logits_equal_hugging_face_with_its_attention_mask():
    hf = hf_model("gelu_new")
    ours = from_hf_gpt2(hf)
    ids = torch.randint(2, 97, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, :4] = 0
    ids[0, :4] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask, position_ids=positions).logits
        got = ours(ids, keep=mask.bool()).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_generation_is_token_identical_to_hugging_face(name):
    hf = hf_model(name)
    ours = from_hf_gpt2(hf)
    prompt = torch.randint(2, hf.config.vocab_size, (1, 5))
    new = hf.config.n_positions - 5
    with torch.no_grad():
        expected = hf.generate(
            prompt, max_new_tokens=new, do_sample=False, eos_token_id=None, pad_token_id=1
        )[0, 5:].tolist()
    got = generate(ours, prompt.tolist(), SamplingConfig(max_new_tokens=new, temperature=0.0))
    assert got.tokens[0] == expected


def test_batched_left_padded_greedy_generation_matches_hugging_face():
    hf = hf_model("gelu_new")
    ours = from_hf_gpt2(hf)
    prompts = [[5, 9, 23, 4], [7], [40, 41, 42, 43, 44, 45, 46]]
    longest = max(map(len, prompts))
    ids = torch.tensor([[1] * (longest - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        expected = hf.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=20,
            do_sample=False,
            pad_token_id=1,
            eos_token_id=None,
        )[:, longest:].tolist()
    got = generate(ours, prompts, SamplingConfig(max_new_tokens=20, temperature=0.0))
    assert got.tokens == expected


def test_a_saved_folder_loads_without_transformers_and_corruption_is_named(tmp_path):
    hf = hf_model("gelu_new")
    hf.save_pretrained(tmp_path / "gpt2", safe_serialization=True)
    ours = load_gpt2(tmp_path / "gpt2")
    ids = torch.randint(0, 97, (2, 11))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, hf(ids).logits, atol=1e-5, rtol=0)

    weights = tmp_path / "gpt2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(GPT2ImportError, match="cannot be read"):
        load_gpt2(tmp_path / "gpt2")
    with pytest.raises(GPT2ImportError, match=r"has no config\.json"):
        load_gpt2(tmp_path)


def test_unsupported_gpt2_options_are_named():
    with pytest.raises(GPT2ImportError, match="reorder_and_upcast_attn"):
        gpt2_config({**CONFIGS["gelu_new"], "reorder_and_upcast_attn": True})
    with pytest.raises(GPT2ImportError, match="activation_function='swish'"):
        gpt2_config({**CONFIGS["gelu_new"], "activation_function": "swish"})

"""qkv's BertEncoder is Hugging Face's BertModel: a randomly initialised one, its weights
imported (live or from a saved folder), gives the same hidden states, pooled output and attention
weights (1e-5) with padding and segment types; bad folders and unsupported configs are named."""

from __future__ import annotations

import json
import os

import pytest
import torch

from qkv.interop.bert import BertImportError, bert_config, bert_state_dict, from_hf_bert, load_bert

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

CONFIGS = {
    "gelu": dict(
        vocab_size=97,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=80,
        max_position_embeddings=40,
    ),
    "gelu_new+eps": dict(
        vocab_size=61,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=24,
        type_vocab_size=3,
        hidden_act="gelu_new",
        layer_norm_eps=1e-6,
        pad_token_id=1,
    ),
}


def hf_config(name: str, **overrides):
    return transformers.BertConfig(
        **CONFIGS[name], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides
    )


def perturbed(model):
    torch.manual_seed(1)
    with torch.no_grad():  # HF zero-initialises biases and unit-initialises norms: perturb all
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def hf_model(name: str, **overrides):
    torch.manual_seed(0)
    return perturbed(transformers.BertModel(hf_config(name, **overrides)))


def padded_batch(vocab: int, types: int):
    torch.manual_seed(2)
    ids = torch.randint(2, vocab, (3, 13))
    mask = torch.ones(3, 13, dtype=torch.long)
    mask[1, 8:], mask[2, 3:] = 0, 0
    ids[mask == 0] = 0
    token_types = torch.randint(0, types, (3, 13))
    return ids, mask, token_types


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_outputs_equal_hugging_face_with_padding_and_segment_types(name, attention):
    hf = hf_model(name, attn_implementation=attention)
    ours = from_hf_bert(hf)
    ids, mask, types = padded_batch(hf.config.vocab_size, hf.config.type_vocab_size)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask, token_type_ids=types)
        got = ours(ids, keep=mask.bool(), token_type_ids=types)
    real = mask.bool()
    torch.testing.assert_close(
        got.hidden[real], expected.last_hidden_state[real], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(got.pooled, expected.pooler_output, atol=1e-5, rtol=0)
    # The packed inference path (segment type 0) agrees too.
    lengths = mask.sum(1)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask).last_hidden_state[real]
    torch.testing.assert_close(ours.packed_hidden(ids, lengths), expected, atol=1e-5, rtol=0)


def test_attention_weights_equal_hugging_face():
    hf = hf_model("gelu", attn_implementation="eager")
    ours = from_hf_bert(hf)
    ids, mask, types = padded_batch(97, 2)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask, token_type_ids=types, output_attentions=True)
        got = ours(ids, keep=mask.bool(), token_type_ids=types, need_weights=True)
    assert len(got.attentions) == len(expected.attentions) == 3
    real = mask.bool()
    for mine, theirs in zip(got.attentions, expected.attentions, strict=True):
        # (B, H, T, T): compare the rows of real queries (padded queries are never used)
        torch.testing.assert_close(
            mine.transpose(1, 2)[real], theirs.transpose(1, 2)[real], atol=1e-5, rtol=0
        )


def test_a_task_model_under_the_bert_prefix_imports_without_its_head():
    torch.manual_seed(0)
    hf = perturbed(transformers.BertForSequenceClassification(hf_config("gelu", num_labels=3)))
    assert any(k.startswith("bert.") for k in hf.state_dict())
    ours = from_hf_bert(hf)
    ids, mask, types = padded_batch(97, 2)
    with torch.no_grad():
        expected = hf.bert(ids, attention_mask=mask, token_type_ids=types).pooler_output
        got = ours(ids, keep=mask.bool(), token_type_ids=types).pooled
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_a_saved_folder_loads_without_transformers_and_corruption_is_named(tmp_path):
    hf = hf_model("gelu_new+eps")
    folder = tmp_path / "bert"
    hf.save_pretrained(folder, safe_serialization=True)
    ours = load_bert(folder)
    assert ours.config.activation == "gelu_tanh" and ours.config.pad_token_id == 1
    ids, mask, types = padded_batch(61, 3)
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        got = ours(ids, keep=mask.bool(), token_type_ids=types).hidden
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=1e-5, rtol=0)

    from safetensors.torch import load_file, save_file

    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    name = "embeddings.word_embeddings.weight"
    nan_row = tensors[name].clone().index_fill_(0, torch.tensor([3]), float("nan"))  # 32 values
    for bad, message in (
        (nan_row, "holds 32 NaN or infinite value"),
        (tensors[name].long(), "has dtype torch.int64; weights and biases must be floating"),
    ):
        save_file({**tensors, name: bad}, weights)
        with pytest.raises(BertImportError, match=f"tensor '{name}' {message}"):
            load_bert(folder)
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(BertImportError, match=r"model\.safetensors cannot be read"):
        load_bert(folder)
    with pytest.raises(BertImportError, match=r"has no config\.json"):
        load_bert(tmp_path)
    with pytest.raises(BertImportError, match="no model folder at"):
        load_bert(tmp_path / "missing")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(BertImportError, match=r"config\.json: Expecting"):
        load_bert(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(BertImportError, match="holds a 'gpt2' model, not bert"):
        load_bert(folder)


def test_missing_unexpected_and_mis_shaped_tensors_are_listed():
    hf = hf_model("gelu")
    config = bert_config(hf.config.to_dict())
    state = dict(hf.state_dict())
    missing = {k: v for k, v in state.items() if not k.startswith("pooler.")}
    with pytest.raises(BertImportError, match=r"lack 2 tensor\(s\): pooler.dense.bias, pooler"):
        bert_state_dict(missing, config)
    extra = {**state, "encoder.layer.3.output.dense.weight": torch.zeros(1)}
    with pytest.raises(BertImportError, match=r"unexpected .*encoder\.layer\.3\.output"):
        bert_state_dict(extra, config)
    fewer_layers = bert_config({**hf.config.to_dict(), "num_hidden_layers": 2})
    with pytest.raises(BertImportError, match=r"num_hidden_layers=2\): encoder\.layer\.2\."):
        bert_state_dict(state, fewer_layers)
    hf.embeddings.word_embeddings = torch.nn.Embedding(90, 48)  # the config still says 97
    with pytest.raises(BertImportError, match=r"word_embeddings.weight: .*\(90, 48\).*\(97, 48\)"):
        from_hf_bert(hf)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("position_embedding_type", "relative_key", "position_embedding_type='relative_key'"),
        ("is_decoder", True, "is_decoder=True is not supported"),
        ("add_cross_attention", True, "add_cross_attention=True"),
        ("hidden_act", "silu", "hidden_act='silu' is not supported; known: gelu"),
        ("num_attention_heads", 5, "hidden_size=48 is not divisible by num_heads=5"),
    ],
)
def test_unsupported_configs_are_named(key, value, message):
    with pytest.raises(BertImportError, match=message):
        bert_config({**CONFIGS["gelu"], key: value})


def test_a_config_without_sizes_is_named():
    with pytest.raises(BertImportError, match="lacks 'hidden_size'"):
        bert_config({k: v for k, v in CONFIGS["gelu"].items() if k != "hidden_size"})

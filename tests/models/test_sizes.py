"""Model sizes that cannot fit in memory are refused by the config, before anything is
allocated, with the sizes named; each family's parameter estimate is close to (and not above)
the parameters its model really has, so the check refuses only what cannot fit; model sections
of the wrong type name ``model.KEY`` and the value."""

from __future__ import annotations

import pytest

import qkv.models.sizes as sizes
from qkv.models.bert.model import BertConfig
from qkv.models.classifier import EncoderClassifierConfig
from qkv.models.cloze_reader import READERS, ClozeReaderConfig
from qkv.models.language_model.model import TransformerLMConfig
from qkv.models.registry import build_config, build_model
from qkv.models.seq2seq_rnn import Seq2SeqRNNConfig
from qkv.models.show_attend_tell.model import ShowAttendTellConfig
from qkv.models.span_reader import SpanReaderConfig
from qkv.models.tagger import SequenceTaggerConfig
from qkv.models.transformer.model import TransformerConfig
from qkv.models.vit import ViTConfig

pytestmark = pytest.mark.usefixtures("one_thread")

# A small model of each family, built for real to count its parameters.
SMALL = [
    ("transformer", TransformerConfig, {"src_vocab_size": 300, "tgt_vocab_size": 200,
                                        "d_model": 32, "num_heads": 4, "num_encoder_layers": 2,
                                        "num_decoder_layers": 2, "d_ff": 64}),
    ("transformer_lm", TransformerLMConfig, {"vocab_size": 300, "max_len": 64, "d_model": 32,
                                             "num_heads": 4, "num_layers": 2, "d_ff": 64,
                                             "tie_weights": False}),
    ("seq2seq_rnn", Seq2SeqRNNConfig, {"src_vocab_size": 300, "tgt_vocab_size": 200,
                                       "embed_dim": 32, "hidden_dim": 32, "num_layers": 2}),
    ("bert", BertConfig, {"vocab_size": 300, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
                          "intermediate_size": 64, "max_position_embeddings": 64}),
    ("vit", ViTConfig, {"image_size": 32, "patch_size": 4, "num_channels": 3, "hidden_size": 32,
                        "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
                        "num_labels": 10}),
    ("show_attend_tell", ShowAttendTellConfig, {"vocab_size": 13, "tile_height": 16,
                                                "tile_width": 16, "conv_channels": [8, 16],
                                                "feature_dim": 32, "embed_dim": 16,
                                                "hidden_dim": 32, "attention_dim": 32}),
    ("encoder_classifier", EncoderClassifierConfig, {"vocab_size": 300, "num_labels": 3,
                                                     "d_model": 32, "num_heads": 4,
                                                     "num_layers": 2, "d_ff": 64, "max_len": 64}),
    ("encoder_classifier", EncoderClassifierConfig, {"vocab_size": 300, "num_labels": 3,
                                                     "encoder": "bilstm", "d_model": 32,
                                                     "num_heads": 4, "num_layers": 2,
                                                     "max_len": 64}),
    ("sequence_tagger", SequenceTaggerConfig, {"vocab_size": 300, "num_tags": 5, "d_model": 32,
                                               "num_heads": 4, "num_layers": 2, "d_ff": 64,
                                               "max_len": 64}),
    *[("cloze_reader", ClozeReaderConfig, {"vocab_size": 300, "reader": reader, "embed_dim": 32,
                                           "hidden_dim": 16, "attention_dim": 24})
      for reader in READERS],
    ("span_reader", SpanReaderConfig, {"vocab_size": 300, "embed_dim": 32, "hidden_dim": 16,
                                       "num_layers": 2}),
    ("span_reader", SpanReaderConfig, {"vocab_size": 300, "embed_dim": 32, "hidden_dim": 16,
                                       "num_layers": 1, "aligned": False,
                                       "exact_match": False}),
]  # fmt: skip
IDS = [
    f"{family}-{values.get('encoder', values.get('reader', 'default'))}"
    for family, _, values in SMALL
]


@pytest.mark.parametrize(("family", "cls", "values"), SMALL, ids=IDS)
def test_the_estimate_is_close_to_the_real_parameter_count(family, cls, values, monkeypatch):
    """With memory for the model's real parameters the config passes; with 60% of that it is
    refused: the estimate lies between 0.6 and 1 times the real count."""
    config = build_config(family, values)
    assert isinstance(config, cls)
    real = sum(p.numel() for p in build_model(family, config).parameters())
    monkeypatch.setattr(sizes, "memory_bytes", lambda: real * sizes.BYTES_PER_PARAMETER)
    build_config(family, values)
    monkeypatch.setattr(sizes, "memory_bytes", lambda: int(0.6 * real) * sizes.BYTES_PER_PARAMETER)
    with pytest.raises(ValueError, match="more than this machine's memory"):
        build_config(family, values)


@pytest.mark.parametrize(
    ("family", "values", "named"),
    [
        ("transformer", {"src_vocab_size": 32, "tgt_vocab_size": 32, "d_model": 2**40},
         "d_model=1099511627776"),
        ("transformer_lm", {"vocab_size": 10**9, "d_model": 10**6, "num_heads": 1},
         "vocab_size=1000000000"),
        ("seq2seq_rnn", {"src_vocab_size": 32, "tgt_vocab_size": 32, "hidden_dim": 2**30},
         "hidden_dim=1073741824"),
        ("vit", {"image_size": 100_000, "patch_size": 4}, "image_size=100000"),
        ("show_attend_tell", {"vocab_size": 13, "tile_height": 2**20, "tile_width": 2**20},
         "tile_height=1048576"),
        ("encoder_classifier", {"vocab_size": 32, "num_labels": 2, "max_len": 2**40},
         "max_len=1099511627776"),
        ("bert", {"vocab_size": 32, "hidden_size": 2**36, "num_heads": 1},
         "hidden_size=68719476736"),
        ("cloze_reader", {"vocab_size": 2**40}, "vocab_size=1099511627776"),
        ("span_reader", {"vocab_size": 32, "hidden_dim": 2**30}, "hidden_dim=1073741824"),
    ],
)  # fmt: skip
def test_sizes_beyond_memory_are_refused_naming_them(family, values, named):
    with pytest.raises(ValueError) as error:
        build_config(family, values)
    message = str(error.value)
    assert named in message and "more than this machine's memory" in message
    assert "choose smaller sizes" in message


def test_the_limit_is_this_machines_memory(monkeypatch):
    """A base Transformer (44M parameters, 180 MB) fits in 1 GiB and not in 100 MB."""
    values = {"src_vocab_size": 1000, "tgt_vocab_size": 1000}
    monkeypatch.setattr(sizes, "memory_bytes", lambda: 2**30)
    assert build_config("transformer", values).d_model == 512
    monkeypatch.setattr(sizes, "memory_bytes", lambda: 100 * 2**20)
    with pytest.raises(ValueError, match=r"about 4\.\d+e\+07 parameters \(1\d\d\.\d MiB in "
                                         r"float32\), more than this machine's memory \(100\.0 "
                                         r"MiB\)"):  # fmt: skip
        build_config("transformer", values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"d_model": "64"}, "model.d_model must be an integer, got '64' (str)"),
        ({"d_model": 64.0}, "model.d_model must be an integer, got 64.0 (float)"),
        ({"num_heads": True}, "model.num_heads must be an integer, got True (bool)"),
        ({"dropout": "nan"}, "model.dropout must be a number, got 'nan' (str)"),
        ({"dropout": float("nan")}, "model.dropout must be a finite number, got nan"),
        ({"d_model": "1e3"}, "YAML reads it as text: give an exponent a dot and a sign"),
        ({3: 4}, "model has the key 3 (int)"),
    ],
)
def test_model_values_of_the_wrong_type_name_the_key(values, message):
    with pytest.raises(ValueError) as error:
        build_config("transformer", {"src_vocab_size": 32, "tgt_vocab_size": 32, **values})
    assert message in str(error.value)


def test_a_missing_required_size_is_a_value_error():
    with pytest.raises(ValueError, match=r"transformer model: .*tgt_vocab_size"):
        build_config("transformer", {"src_vocab_size": 32})


def test_a_bert_encoder_section_is_checked_too():
    base = {"vocab_size": 32, "num_labels": 2, "encoder": "bert"}
    bert = {"vocab_size": 32, "hidden_size": 8, "num_layers": 1, "num_heads": 2,
            "intermediate_size": 16, "max_position_embeddings": 16}  # fmt: skip
    with pytest.raises(ValueError, match=r"bert\.hidden_size must be an integer, got '8'"):
        build_config("encoder_classifier", {**base, "bert": {**bert, "hidden_size": "8"}})
    with pytest.raises(ValueError, match=r"bert has unknown BertConfig field.* colour"):
        build_config("encoder_classifier", {**base, "bert": {**bert, "colour": 1}})
    assert build_config("encoder_classifier", {**base, "bert": bert}).bert == bert

"""The neuron view of an encoder-decoder Transformer (translation, dialogue): the query and key
vectors attached to the encoder self-attention, decoder self-attention and cross-attention views
explain those views' weights, layer by layer and head by head: softmax over the keys of
``q . k / sqrt(Dk)`` (causal for the decoder) is the weight shown. Vectors placed on the wrong
view or layer break it (checked: the test tells the layers apart). The weights shown are those
decoding computed (the lean decoder's cross-attention), and an RNN refuses, saying why."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import qkv
from qkv.models.registry import build_config, build_model
from qkv.tasks.seen import TokenView
from qkv.tasks.spec import ViewOptions
from qkv.tasks.translation.runner import Translator

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"
SOURCE = "a b c d"
DIALOGUE = "How fares the king ? <turn> He sleeps ."

pytestmark = pytest.mark.usefixtures("one_thread")


def explained(view: TokenView, vectors: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``softmax_k(q . k / sqrt(Dk) + mask)`` in float64 from one layer's vectors:
    ``(H, Tq, Tk)``."""
    q, k = (v.double() for v in vectors)  # (H, Tq, Dk), (Hkv, Tk, Dk)
    k = k.repeat_interleave(q.size(0) // k.size(0), dim=0)  # (H, Tk, Dk)
    scaled = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))  # (H, Tq, Tk)
    if view.id == "decoder":  # causal: query t reads <s> and the tokens before t
        later = torch.ones(scaled.shape[1:], dtype=torch.bool).triu(1)  # (Tq, Tk)
        scaled = scaled.masked_fill(later, -math.inf)
    return torch.softmax(scaled, dim=-1)


def check_vectors_explain_weights(views: list) -> None:
    ids = {v.id for v in views if isinstance(v, TokenView) and v.vectors is not None}
    assert ids == {"encoder", "decoder", "cross"}
    for view in views:
        if view.vectors is None:
            continue
        for weights, vectors in zip(view.layers, view.vectors, strict=True):
            torch.testing.assert_close(
                explained(view, vectors), weights.double(), atol=1e-5, rtol=0
            )
        if len(view.layers) > 1:  # the check tells layers apart: layer 0's vectors are not 1's
            assert not torch.allclose(
                explained(view, view.vectors[0]), view.layers[1].double(), atol=1e-3
            )


@pytest.mark.parametrize("beam", [None, 3])
def test_translation_vectors_explain_every_view_layer_and_head(beam):
    runner = qkv.load(RUNS / "translation")
    seen = runner.views(SOURCE, ViewOptions(neuron=True, beam=beam))
    check_vectors_explain_weights(seen.views)
    plain = runner.views(SOURCE, ViewOptions(beam=beam))
    assert [v.id for v in plain.views] == [v.id for v in seen.views]
    for with_vectors, without in zip(seen.views, plain.views, strict=True):
        assert without.vectors is None  # opt-in
        for a, b in zip(with_vectors.layers, without.layers, strict=True):
            torch.testing.assert_close(a, b, atol=0, rtol=0)  # recording changes no weight


def test_dialogue_vectors_explain_every_view_layer_and_head():
    seen = qkv.load(RUNS / "dialogue").views(DIALOGUE, ViewOptions(neuron=True))
    check_vectors_explain_weights(seen.views)


@pytest.mark.parametrize("beam", [1, 3])
def test_the_weights_shown_are_those_decoding_computed(beam):
    # The views come from one teacher-forced pass on (source, <s> + output); the output came
    # from the lean decoder, whose own cross-attention (last layer, heads averaged) is the same.
    runner = Translator.load(RUNS / "translation")
    (translation,) = runner.translate([SOURCE], beam_size=beam, attention=True)
    seen = runner.views(SOURCE, ViewOptions(neuron=True, beam=beam))
    cross = seen.view("cross")
    assert cross.queries == translation.target_pieces
    assert translation.attention is not None
    torch.testing.assert_close(cross.layers[-1].mean(0), translation.attention, atol=1e-5, rtol=0)


def test_a_copying_transformer_records_its_teacher_forced_pass_not_its_cached_decoding():
    # A copy head takes the module path: cached decoder steps, which the recording must not see.
    fixture = Translator.load(RUNS / "translation")
    sizes = {"src_vocab_size": 25, "tgt_vocab_size": 25, "d_model": 16, "num_heads": 2,
             "d_ff": 32, "num_encoder_layers": 2, "num_decoder_layers": 2, "copy": True,
             "dropout": 0.0}  # fmt: skip
    torch.manual_seed(0)
    model = build_model("transformer", build_config("transformer", sizes)).eval()
    runner = Translator(model, fixture.source_tokenizer, fixture.target_tokenizer, fixture.decode)
    check_vectors_explain_weights(runner.views(SOURCE, ViewOptions(neuron=True)).views)


def test_an_rnn_refuses_the_neuron_view_naming_why():
    fixture = Translator.load(RUNS / "translation")
    for attention in ("bahdanau", "luong"):
        config = {"src_vocab_size": 25, "tgt_vocab_size": 25, "attention": attention}
        rnn = build_model("seq2seq_rnn", build_config("seq2seq_rnn", config)).eval()
        runner = Translator(rnn, fixture.source_tokenizer, fixture.target_tokenizer, fixture.decode)
        assert runner.views(SOURCE).view("cross").vectors is None
        with pytest.raises(ValueError, match=r"this Seq2SeqRNN has none .*Bahdanau or Luong"):
            runner.views(SOURCE, ViewOptions(neuron=True))
    with pytest.raises(ValueError, match="this Seq2SeqRNN has none"):  # a summariser too
        qkv.load(RUNS / "summarisation").views("the king of bavotek", ViewOptions(neuron=True))

"""The lean decode step of the translation Transformer: the module path's outputs token for token
in float32 (greedy and beam, padded batches, post- and pre-norm, shared and separate
embeddings), its attention and log-probabilities step by step, and the recorded closeness of
bfloat16 and int8 weights."""

import pytest
import torch

from qkv.decoding import beam_search, greedy_search
from qkv.layers.packed_linear import linear, pack, quantize_int8
from qkv.models.transformer.decode import (
    LeanTranslationDecoder,
    TranslationDecodeWeights,
    decode_weights,
    has_lean_step,
)
from qkv.models.transformer.model import Transformer, TransformerConfig
from tests.models.reverse_task import LENGTHS, source_batch, train_to_reverse

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 40
VARIANTS = {
    "post-norm, shared, tied": {},
    "pre-norm, separate, untied, gelu": {
        "norm_first": True,
        "share_embeddings": False,
        "tie_output": False,
        "activation": "gelu",
    },
    "pre-norm, shared, tied, normal init": {"norm_first": True, "embed_init": "normal"},
}


def _model(seed: int = 0, **options) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(
        src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=32, num_heads=4,
        num_encoder_layers=2, num_decoder_layers=2, d_ff=64, dropout=0.0,
        **{"share_embeddings": True, **options},
    )  # fmt: skip
    return Transformer(config).eval()


_TRAINED: dict[tuple, Transformer] = {}


def _trained(seed: int = 0, **options) -> Transformer:
    """A model trained for 120 steps to reverse its source (half-learnt: its outputs vary in
    length and content, and end with EOS of its own accord)."""
    key = (seed, *sorted(options.items()))
    if key not in _TRAINED:
        model = train_to_reverse(_model(seed, **options), VOCAB, steps=120, lr=3e-3, seed=seed)
        _TRAINED[key] = model
    return _TRAINED[key]


def _batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    return source_batch(VOCAB, seed)


MAX_LEN = [12, 6, 15, 4, 9, 14]  # one limit per sentence, as the Translator sets them


def _decode(model, beam: int, src, lengths, **options):
    with torch.inference_mode():
        if beam == 1:
            return greedy_search(model, src, lengths, max_len=MAX_LEN, **options)
        return [
            h[0]
            for h in beam_search(model, src, lengths, beam_size=beam, max_len=MAX_LEN, **options)
        ]


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_float32_outputs_equal_the_module_path(variant, beam):
    model = _trained(**VARIANTS[variant])
    src, lengths = _batch()
    reference = _decode(model, beam, src, lengths)
    lean = LeanTranslationDecoder(model, max_len=max(MAX_LEN))
    outputs = _decode(lean, beam, src, lengths)
    assert [h.tokens for h in outputs] == [h.tokens for h in reference]
    for ours, theirs in zip(outputs, reference, strict=True):
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)
    # The outputs vary and most end with their own EOS before the limit, so the equality
    # above compares real searches.
    assert len({tuple(h.tokens) for h in reference}) == len(LENGTHS)
    assert sum(len(h.tokens) < limit for h, limit in zip(reference, MAX_LEN, strict=True)) >= 4


def test_beam_search_with_n_best_and_length_penalty_equals_the_module_path():
    model = _trained(seed=3)
    src, lengths = _batch(seed=4)
    options = {"beam_size": 5, "max_len": MAX_LEN, "n_best": 3, "length_penalty": 1.0}
    with torch.inference_mode():
        reference = beam_search(model, src, lengths, **options)
        lean = beam_search(LeanTranslationDecoder(model, max_len=15), src, lengths, **options)
    assert [[h.tokens for h in hyps] for hyps in lean] == [
        [h.tokens for h in hyps] for hyps in reference
    ]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_step_gives_the_module_path_log_probs_and_attention(variant):
    model = _model(**VARIANTS[variant])
    src, lengths = _batch()
    lean = LeanTranslationDecoder(model, max_len=8, need_attention=True)
    generator = torch.Generator().manual_seed(2)
    fed = torch.randint(4, VOCAB, (8, len(LENGTHS)), generator=generator)  # teacher forcing
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths))
        ours = lean.init_state(lean.encode(src, lengths))
        for tokens in fed:
            reference = model.step(tokens, state)
            out = lean.step(tokens, ours)
            torch.testing.assert_close(out.log_probs, reference.log_probs, atol=2e-5, rtol=0)
            torch.testing.assert_close(out.attention, reference.attention, atol=1e-6, rtol=0)
            state, ours = reference.state, out.state
    # Attention over padding is exactly zero, and each row sums to one.
    padding = torch.arange(max(LENGTHS))[None, :] >= lengths[:, None]
    assert torch.all(out.attention[padding] == 0)
    torch.testing.assert_close(out.attention.sum(dim=1), torch.ones(len(LENGTHS)))


def test_reordering_rows_moves_their_caches():
    """A state selected to other rows continues as the module path's state selected so."""
    model = _model()
    src, lengths = _batch()
    lean = LeanTranslationDecoder(model, max_len=6)
    fed = torch.randint(4, VOCAB, (3, len(LENGTHS)), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths))
        ours = lean.init_state(lean.encode(src, lengths))
        rows = torch.arange(len(LENGTHS)).repeat_interleave(3)  # 3 hypotheses per sentence
        state, ours = model.select_state(state, rows), lean.select_state(ours, rows)
        for tokens in fed:
            tokens = tokens.repeat_interleave(3)
            state, ours = model.step(tokens, state).state, lean.step(tokens, ours).state
        # Keep sentences 1, 2 and 4, each with its hypotheses reordered.
        parents = torch.tensor([5, 3, 3, 8, 6, 7, 12, 14, 12])
        state, ours = model.select_state(state, parents), lean.select_state(ours, parents)
        tokens = torch.randint(4, VOCAB, (9,), generator=torch.Generator().manual_seed(6))
        reference, out = model.step(tokens, state), lean.step(tokens, ours)
    torch.testing.assert_close(out.log_probs, reference.log_probs, atol=2e-5, rtol=0)


def test_select_state_refuses_rows_that_mix_sentences():
    model = _model()
    src, lengths = _batch()
    lean = LeanTranslationDecoder(model, max_len=4)
    with torch.inference_mode():
        state = lean.init_state(lean.encode(src, lengths))
        state = lean.select_state(state, torch.arange(len(LENGTHS)).repeat_interleave(2))
        with pytest.raises(ValueError, match="rows of each sentence together"):
            lean.select_state(state, torch.tensor([2, 3, 0, 1]))  # sentence 1 before sentence 0
        with pytest.raises(ValueError, match="rows of each sentence together"):
            lean.select_state(state, torch.tensor([0, 1, 2]))  # 2 rows of one, 1 of another


def test_stepping_past_max_len_is_refused():
    model = _model()
    src, lengths = _batch()
    lean = LeanTranslationDecoder(model, max_len=1)
    tokens = torch.full((len(LENGTHS),), 1)
    with torch.inference_mode():
        state = lean.init_state(lean.encode(src, lengths))
        state = lean.step(tokens, lean.step(tokens, state).state).state
        with pytest.raises(ValueError, match="past the max_len=1"):
            lean.step(tokens, state)
    with pytest.raises(ValueError, match="max_len must be an int >= 0"):
        LeanTranslationDecoder(model, max_len=-1)


def test_a_copying_transformer_has_no_lean_step():
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16,
                                          num_heads=2, d_ff=32, copy=True))  # fmt: skip
    assert not has_lean_step(model) and has_lean_step(_model())
    with pytest.raises(ValueError, match="no copy head"):
        TranslationDecodeWeights(model)


def test_packed_weights_are_reused_until_a_parameter_changes():
    model = _model()
    first = decode_weights(model)
    assert decode_weights(model) is first
    assert decode_weights(model, "bfloat16") is not first
    bf16 = decode_weights(model, "bfloat16")
    assert decode_weights(model, "bfloat16") is bf16
    with torch.no_grad():
        model.decoder.layers[0].ffn.linear1.weight.add_(1.0)
    assert decode_weights(model, "bfloat16") is not bf16


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_lower_precisions_stay_close_to_float32(precision):
    """Recorded tolerance: the largest difference of a next-token probability from float32's
    over 8 teacher-forced steps of the batch (measured 0.0055 for bfloat16 and 0.0062 for int8
    on this model)."""
    model = _trained()
    src, lengths = _batch()
    full = LeanTranslationDecoder(model, max_len=8)
    low = LeanTranslationDecoder(model, max_len=8, precision=precision)
    fed = torch.randint(4, VOCAB, (8, len(LENGTHS)), generator=torch.Generator().manual_seed(2))
    worst = 0.0
    with torch.inference_mode():
        a, b = full.init_state(full.encode(src, lengths)), low.init_state(low.encode(src, lengths))
        for tokens in fed:
            x, y = full.step(tokens, a), low.step(tokens, b)
            worst = max(worst, float((x.log_probs.exp() - y.log_probs.exp()).abs().max()))
            a, b = x.state, y.state
    assert 0 < worst < 0.03


def test_int8_quantisation_is_per_channel_and_within_half_a_step():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(6, 10, generator=generator) * torch.tensor(
        [[1e-3], [1], [10], [0], [2], [5]]
    )
    quantized, scales = quantize_int8(weight)
    assert quantized.dtype == torch.int8 and int(quantized.abs().max()) == 127
    assert scales[3] == 1.0 and torch.all(quantized[3] == 0)  # a row of zeros
    torch.testing.assert_close(scales, torch.where(weight.abs().amax(1) > 0,
                                                   weight.abs().amax(1) / 127, 1.0))  # fmt: skip
    error = (quantized.float() * scales[:, None] - weight).abs()
    assert torch.all(error <= scales[:, None] / 2 + 1e-7)


@pytest.mark.parametrize("rows", [1, 15, 33, 128])
def test_int8_products_are_within_the_activation_rounding_of_float64(rows):
    """int8 by int8 (dynamic quantisation of the input): against the dequantised weight times
    the float input in float64, each output is off by at most half an activation step per unit
    of weight, ``(s_x / 2) * sum_k |W_jk|``, with ``s_x`` the input's range over 127 levels (the
    7-bit range FBGEMM uses). A wrong weight scale, channel or zero point breaks the bound."""
    generator = torch.Generator().manual_seed(rows)
    weight, bias = torch.randn(24, 16, generator=generator), torch.randn(24, generator=generator)
    packed = pack(weight, bias, "int8")
    assert packed.weight.dtype == torch.int8 and packed.quantized is not None
    x = torch.randn(rows, 16, generator=generator) * 3
    dequantised = packed.weight.double() * packed.scales.double()[:, None]  # (24, 16)
    expected = x.double() @ dequantised.T + bias.double()
    out = linear(x, packed)
    assert out.dtype == torch.float32 and out.shape == (rows, 24)
    step = (float(x.max().clamp(min=0)) - float(x.min().clamp(max=0))) / 127
    bound = step / 2 * dequantised.abs().sum(dim=1) + 1e-4  # (24,)
    assert torch.all((out.double() - expected).abs() <= bound)
    assert float((out.double() - expected).abs().max()) > 0  # the input was quantised

"""The lean decode step of the RNN translation models: the module path's outputs token for token
in float32 (greedy and beam 4, padded batches, every decoder and score, GRU and LSTM, one and
two layers), its log-probabilities and attention step by step to 1e-5, beams reordered while
sentences finish at different steps, and the refusal of a copying model."""

import pytest
import torch

from qkv.decoding import beam_search, greedy_search
from qkv.models.rnn_decode import LeanRNNDecoder, RNNDecodeWeights, decode_weights, has_lean_step
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from tests.models.reverse_task import LENGTHS, source_batch, train_to_reverse

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 30
# (attention, luong_score, cell, num_layers): every decoder and score, both cells, deep and not.
VARIANTS = {
    "none-gru": ("none", "general", "gru", 1),
    "none-lstm-2": ("none", "general", "lstm", 2),
    "bahdanau-gru-2": ("bahdanau", "general", "gru", 2),
    "bahdanau-lstm": ("bahdanau", "general", "lstm", 1),
    "luong-general-gru": ("luong", "general", "gru", 1),
    "luong-general-lstm-2": ("luong", "general", "lstm", 2),
    "luong-dot-gru": ("luong", "dot", "gru", 1),
    "luong-concat-lstm": ("luong", "concat", "lstm", 1),
}
MAX_LEN = [12, 6, 15, 4, 9, 14]  # one limit per sentence, as the Translator sets them


def _model(variant: str, seed: int = 0) -> Seq2SeqRNN:
    attention, score, cell, layers = VARIANTS[variant]
    torch.manual_seed(seed)
    config = Seq2SeqRNNConfig(
        VOCAB, VOCAB, embed_dim=16, hidden_dim=12, num_layers=layers, cell=cell,
        attention=attention, luong_score=score, dropout=0.0,
    )  # fmt: skip
    return Seq2SeqRNN(config).eval()


_TRAINED: dict[tuple[str, int], Seq2SeqRNN] = {}


def _trained(variant: str, seed: int = 0) -> Seq2SeqRNN:
    """A model trained for 60 steps to reverse its source (half-learnt: its outputs vary in
    length and content, and end with EOS of its own accord)."""
    if (variant, seed) not in _TRAINED:
        model = train_to_reverse(_model(variant, seed), VOCAB, steps=60, lr=1e-2, seed=seed)
        _TRAINED[variant, seed] = model
    return _TRAINED[variant, seed]


def _batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    return source_batch(VOCAB, seed)


def _decode(model, beam: int, src, lengths):
    with torch.inference_mode():
        if beam == 1:
            return greedy_search(model, src, lengths, max_len=MAX_LEN)
        return [h[0] for h in beam_search(model, src, lengths, beam_size=beam, max_len=MAX_LEN)]


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_float32_outputs_equal_the_module_path(variant, beam):
    model = _trained(variant)
    src, lengths = _batch()
    reference = _decode(model, beam, src, lengths)
    outputs = _decode(LeanRNNDecoder(model), beam, src, lengths)
    assert [h.tokens for h in outputs] == [h.tokens for h in reference]
    for ours, theirs in zip(outputs, reference, strict=True):
        assert ours.score == pytest.approx(theirs.score, abs=1e-5)
    # The outputs vary and some end with their own EOS before the limit, so the equality
    # above compares real searches in which sentences finish at different steps.
    assert len({tuple(h.tokens) for h in reference}) >= len(LENGTHS) - 1
    assert sum(len(h.tokens) < limit for h, limit in zip(reference, MAX_LEN, strict=True)) >= 2


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_step_gives_the_module_path_log_probs_and_attention(variant):
    model = _model(variant)
    src, lengths = _batch()
    lean = LeanRNNDecoder(model, need_attention=True)
    fed = torch.randint(4, VOCAB, (8, len(LENGTHS)), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths))
        ours = lean.init_state(lean.encode(src, lengths))
        for tokens in fed:  # teacher forcing
            reference, out = model.step(tokens, state), lean.step(tokens, ours)
            torch.testing.assert_close(out.log_probs, reference.log_probs, atol=1e-5, rtol=0)
            if reference.attention is None:  # the fixed-context decoder attends to nothing
                assert out.attention is None
            else:
                torch.testing.assert_close(out.attention, reference.attention, atol=1e-6, rtol=0)
            state, ours = reference.state, out.state
        quiet = LeanRNNDecoder(model)  # not asked for attention
        assert quiet.step(fed[0], quiet.init_state(quiet.encode(src, lengths))).attention is None


@pytest.mark.parametrize("variant", ["bahdanau-gru-2", "luong-general-lstm-2", "none-lstm-2"])
def test_reordering_rows_moves_their_states(variant):
    """A state selected to other rows, sentences leaving, continues as the module path's state
    selected so; the sentences' keys are not copied while all sentences stay."""
    model = _model(variant)
    src, lengths = _batch()
    lean = LeanRNNDecoder(model)
    fed = torch.randint(4, VOCAB, (3, len(LENGTHS)), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths))
        ours = lean.init_state(lean.encode(src, lengths))
        rows = torch.arange(len(LENGTHS)).repeat_interleave(3)  # 3 hypotheses per sentence
        state, ours = model.select_state(state, rows), lean.select_state(ours, rows)
        keep = ours.keep
        for step, tokens in enumerate(fed):
            tokens = tokens.repeat_interleave(3)
            state, ours = model.step(tokens, state).state, lean.step(tokens, ours).state
            if step == 1:  # reorder within each sentence: the source side stays in place
                parents = torch.tensor(
                    [2, 0, 0, 5, 4, 3, 6, 6, 6, 9, 10, 11, 14, 12, 13, 17, 15, 15]
                )
                state, ours = model.select_state(state, parents), lean.select_state(ours, parents)
                assert ours.keep is keep
        # Keep sentences 1, 2 and 4 (the others finished), each with its hypotheses reordered.
        parents = torch.tensor([5, 3, 3, 8, 6, 7, 12, 14, 12])
        state, ours = model.select_state(state, parents), lean.select_state(ours, parents)
        assert ours.keep.size(0) == 3 and ours.group == 3
        tokens = torch.randint(4, VOCAB, (9,), generator=torch.Generator().manual_seed(6))
        for _ in range(2):
            reference, out = model.step(tokens, state), lean.step(tokens, ours)
            torch.testing.assert_close(out.log_probs, reference.log_probs, atol=1e-5, rtol=0)
            state, ours = reference.state, out.state
            tokens = reference.log_probs.argmax(dim=1)


def test_select_state_refuses_rows_that_mix_sentences():
    model = _model("bahdanau-lstm")
    src, lengths = _batch()
    lean = LeanRNNDecoder(model)
    with torch.inference_mode():
        state = lean.init_state(lean.encode(src, lengths))
        state = lean.select_state(state, torch.arange(len(LENGTHS)).repeat_interleave(2))
        with pytest.raises(ValueError, match="rows of each sentence together"):
            lean.select_state(state, torch.tensor([2, 3, 0, 1]))  # sentence 1 before sentence 0
        with pytest.raises(ValueError, match="rows of each sentence together"):
            lean.select_state(state, torch.tensor([0, 1, 2]))  # 2 rows of one, 1 of another
        with pytest.raises(ValueError, match=r"tokens must be \(R=12,\)"):
            lean.step(torch.ones(6, dtype=torch.long), state)


def test_a_copying_rnn_has_no_lean_step():
    config = Seq2SeqRNNConfig(20, 20, embed_dim=8, hidden_dim=6, copy=True)
    model = Seq2SeqRNN(config)
    assert not has_lean_step(model) and has_lean_step(_model("none-gru"))
    assert not has_lean_step(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="no copy head"):
        RNNDecodeWeights(model)
    with pytest.raises(ValueError, match="no copy head"):
        LeanRNNDecoder(model)
    with pytest.raises(TypeError, match="takes a Seq2SeqRNN, got Linear"):
        RNNDecodeWeights(torch.nn.Linear(2, 2))  # type: ignore[arg-type]


def test_fused_weights_are_reused_until_a_parameter_changes():
    model = _model("luong-dot-gru")
    first = decode_weights(model)
    assert decode_weights(model) is first
    with torch.no_grad():
        model.decoder.rnn.weight_hh_l0.add_(1.0)
    assert decode_weights(model) is not first


def test_the_translator_steps_the_lean_rnn_and_a_copying_rnn_through_its_modules():
    """One place decides (``lean_step_model``): an RNN without a copy head gets the lean step,
    a copying one its module path; only a Transformer takes another precision."""
    from qkv.models.lean_step import lean_step_model
    from qkv.models.transformer.decode import LeanTranslationDecoder

    plain = _model("bahdanau-lstm")
    lean = lean_step_model(plain, "float32", max_len=5, need_attention=True)
    assert isinstance(lean, LeanRNNDecoder) and lean.need_attention
    copying = Seq2SeqRNN(Seq2SeqRNNConfig(20, 20, embed_dim=8, hidden_dim=6, copy=True))
    assert lean_step_model(copying, "float32", max_len=5, need_attention=False) is copying
    assert not isinstance(lean, LeanTranslationDecoder)

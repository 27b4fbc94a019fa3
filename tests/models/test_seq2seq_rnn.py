"""Tests for qkv.models.seq2seq_rnn: the fixed-context, Bahdanau and Luong RNN translation models.

Every variant runs through the same invariants (step protocol equals forward, padding invariance,
attention rows, gradients, beam reordering); the formulas are checked against a float64 reference
written here from the papers' equations with plain tensor operations, and a tiny model must learn
a copy task.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.attention import padding_mask
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig

PAD, BOS, EOS = 0, 1, 2
SRC_V, TGT_V = 13, 11
LENGTHS = torch.tensor([7, 4, 1, 5])  # (B,), unsorted
VARIANTS = [
    ("none", "general"),
    ("bahdanau", "general"),
    ("luong", "dot"),
    ("luong", "general"),
    ("luong", "concat"),
]
ATTENDING = VARIANTS[1:]
CELLS = ["gru", "lstm"]
ALL = [
    pytest.param(a, s, c, id=f"{a}-{s}-{c}" if a == "luong" else f"{a}-{c}")
    for a, s in VARIANTS
    for c in CELLS
]
ATT = [p for p in ALL if p.values[0] != "none"]
TOL = dict(atol=1e-5, rtol=0)


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(attention: str, score: str, cell: str, *, seed: int = 0, **kw) -> Seq2SeqRNN:
    torch.manual_seed(seed)
    options = dict(embed_dim=8, hidden_dim=6, num_layers=2, dropout=0.1) | kw
    config = Seq2SeqRNNConfig(
        SRC_V, TGT_V, cell=cell, attention=attention, luong_score=score, **options
    )
    return Seq2SeqRNN(config)


def make_batch(seed: int = 1) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """src (4, 7) with EOS at each true end, tgt_in/tgt_out (4, 6) right-padded."""
    gen = torch.Generator().manual_seed(seed)
    keep = padding_mask(LENGTHS)[:, 0, 0]  # (B, S)
    src = torch.randint(3, SRC_V, (4, 7), generator=gen).masked_fill(~keep, PAD)
    src[torch.arange(4), LENGTHS - 1] = EOS
    y = torch.randint(3, TGT_V, (4, 5), generator=gen)
    tgt_lengths = torch.tensor([5, 2, 3, 1])
    y = y.masked_fill(~padding_mask(tgt_lengths, 5)[:, 0, 0], PAD)  # (B, 5)
    tgt_in = torch.cat([torch.full((4, 1), BOS), y], dim=1)  # (B, 6)
    tgt_out = torch.cat([y, torch.zeros(4, 1, dtype=torch.long)], dim=1)
    tgt_out[torch.arange(4), tgt_lengths] = EOS
    return src, LENGTHS.clone(), tgt_in, tgt_out


# --- step protocol ----------------------------------------------------------------------------


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_stepping_the_gold_prefix_reproduces_forward(attention, score, cell) -> None:
    model = make_model(attention, score, cell).eval()
    src, lengths, tgt_in, _ = make_batch()
    out = model(src, lengths, tgt_in, need_weights=True)
    expected = out.logits.log_softmax(dim=-1)  # (B, T, V)
    state = model.init_state(model.encode(src, lengths))
    for t in range(tgt_in.size(1)):
        step = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(step.log_probs, expected[:, t], **TOL)
        if attention == "none":
            assert step.attention is None
        else:
            torch.testing.assert_close(step.attention, out.attentions["cross"][0][:, 0, t], **TOL)
        state = step.state


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_select_state_then_step_equals_step_then_select(attention, score, cell) -> None:
    model = make_model(attention, score, cell).eval()
    src, lengths, tgt_in, _ = make_batch()
    state = model.init_state(model.encode(src, lengths))
    for t in range(2):
        state = model.step(tgt_in[:, t], state).state
    index = torch.tensor([2, 0, 0, 3, 1])  # reorder and repeat, as beam search does
    moved = model.step(tgt_in[index, 2], model.select_state(state, index))
    plain = model.step(tgt_in[:, 2], state)
    torch.testing.assert_close(moved.log_probs, plain.log_probs[index], **TOL)
    if attention != "none":
        torch.testing.assert_close(moved.attention, plain.attention[index], **TOL)
    for f in fields(plain.state):
        a, b = getattr(moved.state, f.name), getattr(plain.state, f.name)
        assert (a is None) == (b is None), f.name
        if b is not None:
            torch.testing.assert_close(a, b[index], **TOL)


# --- padding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_padding_changes_nothing(attention, score, cell) -> None:
    model = make_model(attention, score, cell).eval()
    src, lengths, tgt_in, _ = make_batch()
    base = model(src, lengths, tgt_in, need_weights=True)
    pads = src == PAD
    garbage = src.masked_scatter(pads, torch.randint(3, SRC_V, (int(pads.sum()),)))
    longer = torch.cat([src, torch.full((4, 3), PAD)], dim=1)  # (B, S + 3), same lengths
    for other in (garbage, longer):
        out = model(other, lengths, tgt_in, need_weights=True)
        torch.testing.assert_close(out.logits, base.logits, **TOL)
        if attention != "none":
            weights, expected = out.attentions["cross"][0], base.attentions["cross"][0]
            torch.testing.assert_close(weights[..., :7], expected, **TOL)
            assert (weights[..., 7:] == 0).all()


@pytest.mark.parametrize(("attention", "score", "cell"), ATT)
def test_attention_rows_sum_to_one_over_the_true_source(attention, score, cell) -> None:
    model = make_model(attention, score, cell).eval()
    src, lengths, tgt_in, _ = make_batch()
    (weights,) = model(src, lengths, tgt_in, need_weights=True).attentions["cross"]
    assert weights.shape == (4, 1, 6, 7)  # (B, 1, T, S)
    keep = padding_mask(lengths)  # (B, 1, 1, S)
    assert (weights >= 0).all()
    assert (weights.masked_select(~keep) == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 1, 6), **TOL)
    assert not torch.allclose(weights[0], weights[0].mean(-1, keepdim=True))  # not uniform


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_need_weights_does_not_change_logits(attention, score, cell) -> None:
    model = make_model(attention, score, cell)
    src, lengths, tgt_in, _ = make_batch()
    for training in (False, True):
        model.train(training)
        torch.manual_seed(5)
        with_weights = model(src, lengths, tgt_in, need_weights=True)
        torch.manual_seed(5)
        without = model(src, lengths, tgt_in)
        torch.testing.assert_close(with_weights.logits, without.logits, atol=1e-6, rtol=0)
        assert without.attentions == {}
        assert (with_weights.attentions == {}) == (attention == "none")


# --- training ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_every_parameter_gets_a_gradient(attention, score, cell) -> None:
    model = make_model(attention, score, cell).train()
    src, lengths, tgt_in, tgt_out = make_batch()
    logits = model(src, lengths, tgt_in).logits
    F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert param.grad.abs().sum() > 0, name
        assert torch.isfinite(param.grad).all(), name


@pytest.mark.parametrize(("attention", "score", "cell"), ALL[::3])
def test_teacher_forcing_zero_feeds_the_argmax(attention, score, cell) -> None:
    model = make_model(attention, score, cell, dropout=0.0, teacher_forcing=0.0).train()
    src, lengths, tgt_in, _ = make_batch()
    logits = model(src, lengths, tgt_in).logits
    # Reference: greedy decoding through the step protocol, only the first (BOS) input is gold.
    state, tokens = model.init_state(model.encode(src, lengths)), tgt_in[:, 0]
    for t in range(tgt_in.size(1)):
        step = model.step(tokens, state)
        torch.testing.assert_close(step.log_probs, logits[:, t].log_softmax(-1), **TOL)
        state, tokens = step.state, step.log_probs.argmax(-1)
    forced = replace(model.config, teacher_forcing=1.0)
    gold = Seq2SeqRNN(forced).train()
    gold.load_state_dict(model.state_dict())
    gold_logits = gold(src, lengths, tgt_in).logits
    torch.testing.assert_close(gold_logits[:, 0], logits[:, 0])  # same BOS input
    assert not torch.allclose(gold_logits[:, 1:], logits[:, 1:])
    model.eval(), gold.eval()  # no scheduled sampling at evaluation
    torch.testing.assert_close(
        model(src, lengths, tgt_in).logits, gold(src, lengths, tgt_in).logits
    )


def test_scheduled_sampling_mixes_gold_and_predicted_tokens() -> None:
    """At step 1 each row reads either y_0 or the step-0 argmax, about half of each."""
    b = 400
    src = torch.randint(3, SRC_V, (b, 5))
    lengths = torch.full((b,), 5)
    tgt_in = torch.cat([torch.full((b, 1), BOS), torch.randint(3, TGT_V, (b, 1))], dim=1)
    logits = {}
    for ratio in (0.0, 0.5, 1.0):
        model = make_model("bahdanau", "general", "gru", dropout=0.0, teacher_forcing=ratio)
        torch.manual_seed(3)
        logits[ratio] = model.train()(src, lengths, tgt_in).logits[:, 1]  # (b, V)
    as_gold = (logits[0.5] - logits[1.0]).abs().amax(-1) < 1e-6
    as_pred = (logits[0.5] - logits[0.0]).abs().amax(-1) < 1e-6
    differ = (logits[1.0] - logits[0.0]).abs().amax(-1) > 1e-6  # prediction != gold
    assert (as_gold | as_pred).all()
    fraction = (as_gold & differ).sum() / differ.sum()
    assert differ.sum() > 100 and 0.35 < fraction < 0.65


def test_tiny_bahdanau_model_learns_to_copy() -> None:
    torch.manual_seed(0)
    n, vocab = 20, 10
    lengths = torch.randint(3, 7, (n,))  # (N,)
    seqs = [torch.randint(3, vocab, (int(k),)) for k in lengths]
    src = torch.zeros(n, 7, dtype=torch.long)
    tgt_in, tgt_out = torch.zeros(n, 7, dtype=torch.long), torch.zeros(n, 7, dtype=torch.long)
    for i, seq in enumerate(seqs):
        k = len(seq)
        src[i, :k], src[i, k] = seq, EOS
        tgt_in[i, 0], tgt_in[i, 1 : k + 1] = BOS, seq
        tgt_out[i, :k], tgt_out[i, k] = seq, EOS
    config = Seq2SeqRNNConfig(vocab, vocab, embed_dim=16, hidden_dim=16, dropout=0.0)
    model = Seq2SeqRNN(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        logits = model(src, lengths + 1, tgt_in).logits
        loss = F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if loss.item() < 0.05:
            break
    assert loss.item() < 0.1
    model.eval()
    state, tokens = model.init_state(model.encode(src, lengths + 1)), tgt_in[:, 0]
    for t in range(int(lengths.max()) + 1):  # greedy decoding reproduces every sequence
        step = model.step(tokens, state)
        state, tokens = step.state, step.log_probs.argmax(-1)
        real = tgt_out[:, t] != PAD
        assert (tokens[real] == tgt_out[real, t]).all(), t


# --- what distinguishes the three decoders ----------------------------------------------------


@pytest.mark.parametrize("attention", ["none", "bahdanau"])
def test_fixed_context_decoder_sees_only_the_final_encoder_states(attention: str) -> None:
    model = make_model(attention, "general", "lstm").eval()
    src, lengths, tgt_in, _ = make_batch()
    encoded = model.encode(src, lengths)
    noise = replace(encoded, memory=torch.randn_like(encoded.memory))  # every position
    moved = replace(encoded, final=encoded.final + 0.5)

    def run(enc):
        state, out = model.init_state(enc), []
        for t in range(3):
            step = model.step(tgt_in[:, t], state)
            state = step.state
            out.append(step.log_probs)
        return torch.stack(out)

    base = run(encoded)
    assert not torch.allclose(run(moved), base)
    if attention == "none":
        torch.testing.assert_close(run(noise), base, atol=0, rtol=0)
    else:
        assert not torch.allclose(run(noise), base)


@pytest.mark.parametrize(("attention", "score"), ATTENDING)
def test_bahdanau_scores_the_previous_state_luong_the_current(attention: str, score: str) -> None:
    model = make_model(attention, score, "gru").eval()
    src, lengths, tgt_in, _ = make_batch()
    (base,) = model(src, lengths, tgt_in, need_weights=True).attentions["cross"]
    other = tgt_in.clone()
    other[:, 0] = 5  # change y_0: only s_0 (after reading it) depends on it
    (moved,) = model(src, lengths, other, need_weights=True).attentions["cross"]
    if attention == "bahdanau":  # step 0 attends with s_{-1}, the bridged encoder state
        torch.testing.assert_close(moved[:, :, 0], base[:, :, 0], atol=0, rtol=0)
    else:
        assert not torch.allclose(moved[:, :, 0], base[:, :, 0])
    assert not torch.allclose(moved[:, :, 1], base[:, :, 1])


def _gru(x: Tensor, h: Tensor, rnn: torch.nn.GRU) -> Tensor:
    """One GRU step (Cho et al. 2014 eq. 5-8, PyTorch's gate order r, z, n)."""
    gi = x @ rnn.weight_ih_l0.T + rnn.bias_ih_l0  # (B, 3Ds)
    gh = h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0
    (ir, iz, inn), (hr, hz, hn) = gi.chunk(3, -1), gh.chunk(3, -1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    n = torch.tanh(inn + r * hn)
    return (1 - z) * n + z * h


def _maxout(x: Tensor, linear: torch.nn.Linear) -> Tensor:
    pieces = x @ linear.weight.T + linear.bias  # (B, 2Ds)
    return torch.maximum(pieces[:, 0::2], pieces[:, 1::2])  # (B, Ds)


@pytest.mark.parametrize(("attention", "score"), VARIANTS)
def test_matches_the_papers_equations_in_float64(attention: str, score: str) -> None:
    model = make_model(attention, score, "gru", num_layers=1).double().eval()
    src, lengths, tgt_in, _ = make_batch()
    logits = model(src, lengths, tgt_in).logits
    dec, he = model.decoder, 6
    memory = model.encode(src, lengths).memory  # (B, S, 2He), checked in tests/layers
    keep = padding_mask(lengths)[:, 0, 0]  # (B, S)
    final = torch.stack(
        [torch.cat([memory[b, n - 1, :he], memory[b, 0, he:]]) for b, n in enumerate(lengths)]
    )  # (B, 2He): [h->_last; h<-_first]
    s = torch.tanh(final @ dec.bridge.weight.T + dec.bridge.bias)  # s_0 (B, Ds)
    feed = torch.zeros_like(s)

    def attention_over(query: Tensor) -> Tensor:
        if score == "dot" and attention == "luong":
            e = torch.einsum("bd,bsd->bs", query, memory)
        elif score == "general" and attention == "luong":
            e = torch.einsum("bd,de,bse->bs", query, dec.score.weight, memory)
        else:  # Bahdanau (A.1.2) and Luong concat: v^T tanh(W q + U h)
            sc = dec.score
            uh = memory @ sc.key_proj.weight.T
            if sc.key_proj.bias is not None:
                uh = uh + sc.key_proj.bias
            e = torch.tanh((query @ sc.query_proj.weight.T)[:, None] + uh) @ sc.v.weight[0]
        a = e.masked_fill(~keep, -math.inf).softmax(-1)  # (B, S)
        return torch.einsum("bs,bsd->bd", a, memory)  # c (B, 2He)

    for t in range(tgt_in.size(1)):
        emb = model.tgt_embed.weight[tgt_in[:, t]]  # (B, E)
        if attention == "none":  # Cho et al. 2014: c fixed
            s = _gru(torch.cat([emb, final], -1), s, dec.rnn)
            features = _maxout(torch.cat([s, final, emb], -1), dec.readout.linear)
        elif attention == "bahdanau":  # attend with s_{t-1}, then update
            c = attention_over(s)
            s = _gru(torch.cat([emb, c], -1), s, dec.rnn)
            features = _maxout(torch.cat([s, c, emb], -1), dec.readout.linear)
        else:  # Luong: update with input feeding, then attend with h_t
            s = _gru(torch.cat([emb, feed], -1), s, dec.rnn)
            c = attention_over(s)
            features = feed = torch.tanh(torch.cat([c, s], -1) @ dec.combine.weight.T)
        expected = features @ model.generator.weight.T + model.generator.bias
        torch.testing.assert_close(logits[:, t], expected, atol=1e-10, rtol=1e-10)


# --- configuration and inputs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cell": "rnn"}, "cell.*'rnn'"),
        ({"attention": "self"}, "attention.*'self'"),
        ({"luong_score": "cosine"}, "luong_score.*'cosine'"),
        ({"dropout": 1.0}, "dropout.*1.0"),
        ({"dropout": float("nan")}, "dropout.*nan"),
        ({"teacher_forcing": 1.5}, "teacher_forcing.*1.5"),
        ({"teacher_forcing": -0.1}, "teacher_forcing.*-0.1"),
        ({"hidden_dim": 0}, "hidden_dim.*0"),
        ({"embed_dim": 2.5}, "embed_dim.*2.5"),
        ({"num_layers": True}, "num_layers.*True"),
        ({"src_vocab_size": 2}, "src_vocab_size.*2"),
        ({"tgt_vocab_size": None}, "tgt_vocab_size.*None"),
        ({"pad_id": -1}, "pad_id.*-1"),
        ({"bos_id": 0}, "'bos_id': 0"),
    ],
)
def test_config_errors_name_the_bad_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Seq2SeqRNNConfig(**({"src_vocab_size": SRC_V, "tgt_vocab_size": TGT_V} | kwargs))


def test_config_is_frozen_and_sizes_the_decoder_for_dot() -> None:
    config = Seq2SeqRNNConfig(SRC_V, TGT_V, hidden_dim=5, attention="luong", luong_score="dot")
    with pytest.raises(AttributeError):
        config.hidden_dim = 3  # type: ignore[misc]
    model = Seq2SeqRNN(config)
    assert config.decoder_dim == 10 and model.decoder.hidden_dim == 2 * config.hidden_dim


def test_bad_inputs_name_the_values() -> None:
    model = make_model("bahdanau", "general", "gru")
    src, lengths, tgt_in, _ = make_batch()
    with pytest.raises(ValueError, match=r"\[7, 4, 0, 5\]"):
        model(src, torch.tensor([7, 4, 0, 5]), tgt_in)
    with pytest.raises(ValueError, match=r"\[8, 4, 1, 5\]"):
        model(src, torch.tensor([8, 4, 1, 5]), tgt_in)
    with pytest.raises(ValueError, match=r"\(4, 0\)"):
        model(src, lengths, tgt_in[:, :0])
    with pytest.raises(ValueError, match=r"\(3,\)"):
        model(src, lengths[:3], tgt_in)


@pytest.mark.parametrize(("attention", "score", "cell"), ALL)
def test_bfloat16_autocast_trains_like_float32(attention, score, cell):
    # `qkv train --set train.precision=bf16` runs forward and backward under CPU autocast: every
    # variant must run there, and its loss and gradients stay close to float32's.
    src, src_len, tgt_in, tgt_out = make_batch()
    results = []
    for dtype in (None, torch.bfloat16):
        model = make_model(attention, score, cell, dropout=0.0)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            logits = model(src, src_len, tgt_in).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((loss.detach(), grad))
    (loss32, grad32), (loss16, grad16) = results
    torch.testing.assert_close(loss16, loss32, atol=0.02, rtol=0.01)
    assert F.cosine_similarity(grad16, grad32, dim=0) > 0.99

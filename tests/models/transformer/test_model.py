"""The Transformer of Vaswani et al. 2017: against torch.nn.Transformer, cached decoding through the
step protocol, causality, padding invariance, attention maps, gradients, sharing, and learning."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from qkv.attention.masks import causal_mask, padding_mask
from qkv.decoding.protocol import StepModel
from qkv.models.transformer.model import Transformer, TransformerConfig, TransformerState
from tests.layers.test_transformer_layers import copy_layer

V_SRC, V_TGT = 13, 11
D, H, LAYERS, FF = 16, 4, 2, 32
ATOL = 1e-5


def _config(**overrides) -> TransformerConfig:
    sizes = dict(
        src_vocab_size=V_SRC,
        tgt_vocab_size=V_TGT,
        d_model=D,
        num_heads=H,
        num_encoder_layers=LAYERS,
        num_decoder_layers=LAYERS,
        d_ff=FF,
        dropout=0.0,
    )
    return TransformerConfig(**{**sizes, **overrides})


def _randomize(model: nn.Module) -> nn.Module:
    """Non-trivial LayerNorm gains/biases and biases, so every parameter matters in comparisons."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "bias" in name:
                p.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.3)
    return model


@functools.cache
def _model(norm_first: bool = False, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return _randomize(Transformer(_config(norm_first=norm_first))).eval()


def _batch(seed: int = 0, b: int = 4, s: int = 7, t: int = 6) -> tuple[Tensor, Tensor, Tensor]:
    """Right-padded ``src (B, S)`` (row 0 full), its lengths ``(B,)`` and ``tgt_in (B, T)``."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, s + 1, (b,), generator=g)
    lengths[0] = s
    src = torch.randint(3, V_SRC, (b, s), generator=g)
    src[~padding_mask(lengths, s)[:, 0, 0]] = 0  # PAD
    tgt_in = torch.randint(3, V_TGT, (b, t), generator=g)
    tgt_in[:, 0] = 1  # BOS
    return src, lengths, tgt_in


# -- equivalence with PyTorch's own implementation ------------------------------------------------


def _torch_transformer(norm_first: bool) -> nn.Transformer:
    torch.manual_seed(1)
    theirs = nn.Transformer(
        d_model=D,
        nhead=H,
        num_encoder_layers=LAYERS,
        num_decoder_layers=LAYERS,
        dim_feedforward=FF,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
    )
    theirs = _randomize(theirs).eval()
    if not norm_first:
        # nn.Transformer always ends each stack with a LayerNorm; the paper's post-norm stack
        # (and ours) has none, since every sub-layer already ends in one.
        theirs.encoder.norm = None
        theirs.decoder.norm = None
    return theirs


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_equals_torch_transformer(norm_first):
    theirs = _torch_transformer(norm_first)
    torch.manual_seed(2)
    ours = Transformer(_config(norm_first=norm_first)).eval()
    for our_stack, their_stack in ((ours.encoder, theirs.encoder), (ours.decoder, theirs.decoder)):
        for our_layer, their_layer in zip(our_stack.layers, their_stack.layers, strict=True):
            copy_layer(our_layer, their_layer)
        if norm_first:
            our_stack.norm.load_state_dict(their_stack.norm.state_dict())

    src, lengths, tgt_in = _batch()
    ignore = ~padding_mask(lengths, src.size(1))[:, 0, 0]  # PyTorch's polarity: True = ignore
    src_emb, tgt_emb = ours.embed_source(src), ours.embed_target(tgt_in)
    # Grad mode stays on, so PyTorch takes its reference path (no nested-tensor fast path, which
    # would zero the padded positions of the memory).
    memory = theirs.encoder(src_emb, src_key_padding_mask=ignore)
    hidden = theirs.decoder(
        tgt_emb,
        memory,
        tgt_mask=~causal_mask(tgt_in.size(1)),
        tgt_is_causal=True,
        memory_key_padding_mask=ignore,
    )
    torch.testing.assert_close(ours.encode(src, lengths).memory, memory, atol=ATOL, rtol=ATOL)
    logits = ours(src, lengths, tgt_in).logits
    torch.testing.assert_close(logits, ours.output_proj(hidden), atol=ATOL, rtol=ATOL)


def test_embeddings_are_scaled_and_positioned():
    """Section 3.4 (embeddings times sqrt(D)) and 3.5 (sinusoids) on a hand-computed position."""
    model = _model()
    src = torch.tensor([[5, 6]])
    emb = model.embed_source(src)
    pe1 = torch.tensor([[1.0 / 10000 ** (2 * (i // 2) / D) for i in range(D)]])  # angles at pos 1
    pe1 = torch.where(torch.arange(D) % 2 == 0, pe1.sin(), pe1.cos())
    torch.testing.assert_close(emb[0, 1], model.src_embed.weight[6] * D**0.5 + pe1[0])


# -- the step protocol ----------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("max_len", [None, 6], ids=["growing", "preallocated"])
def test_step_reproduces_forward(norm_first, max_len):
    model = _model(norm_first)
    assert isinstance(model, StepModel)
    src, lengths, tgt_in = _batch()
    with torch.no_grad():
        out = model(src, lengths, tgt_in, need_weights=True)
        expected = out.logits.log_softmax(dim=-1)  # (B, T, V)
        cross = out.attentions["cross"][-1].mean(dim=1)  # (B, T, S)
        state = model.init_state(model.encode(src, lengths), max_len=max_len)
        for t in range(tgt_in.size(1)):
            step = model.step(tgt_in[:, t], state)
            state = step.state
            torch.testing.assert_close(step.log_probs, expected[:, t], atol=ATOL, rtol=0)
            torch.testing.assert_close(step.attention, cross[:, t], atol=ATOL, rtol=0)
    assert state.position == tgt_in.size(1)
    assert all(cache.length == tgt_in.size(1) for cache in state.self_caches)


@pytest.mark.parametrize("max_len", [None, 6], ids=["growing", "preallocated"])
def test_select_state_reorders_and_duplicates_rows(max_len):
    """Beam search's use: after ``select_state`` both the copy and the original decode correctly."""
    model = _model()
    src, lengths, tgt_in = _batch()
    index = torch.tensor([2, 0, 0, 3, 1])  # reorder, duplicate and drop nothing
    with torch.no_grad():
        expected = model(src, lengths, tgt_in).logits.log_softmax(dim=-1)
        state = model.init_state(model.encode(src, lengths), max_len=max_len)
        for t in range(2):
            state = model.step(tgt_in[:, t], state).state
        selected = model.select_state(state, index)
        assert selected.memory.shape[0] == len(index) and selected.position == 2
        for t in range(2, tgt_in.size(1)):
            sel = model.step(tgt_in[index, t], selected)
            own = model.step(tgt_in[:, t], state)
            selected, state = sel.state, own.state
            torch.testing.assert_close(sel.log_probs, expected[index, t], atol=ATOL, rtol=0)
            torch.testing.assert_close(own.log_probs, expected[:, t], atol=ATOL, rtol=0)


def test_step_without_attention_and_input_checks():
    model = _model()
    src, lengths, tgt_in = _batch()
    with torch.no_grad():
        encoded = model.encode(src, lengths)
        with_attention = model.step(tgt_in[:, 0], model.init_state(encoded))
        plain = model.step(tgt_in[:, 0], model.init_state(encoded, need_attention=False))
    assert plain.attention is None and isinstance(plain.state, TransformerState)
    assert with_attention.attention.shape == (4, 7)
    torch.testing.assert_close(plain.log_probs, with_attention.log_probs, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=r"tokens must be \(B=4,\)"):
        model.step(tgt_in[:2, 0], model.init_state(encoded))
    with pytest.raises(ValueError, match="overflow"):
        state = model.init_state(encoded, max_len=1)
        model.step(tgt_in[:, 1], model.step(tgt_in[:, 0], state).state)


# -- invariants -----------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(t=st.integers(0, 4), seed=st.integers(0, 2**16), norm_first=st.booleans())
def test_causality(t, seed, norm_first):
    """Changing target tokens after position t leaves the logits at positions <= t unchanged."""
    model = _model(norm_first)
    src, lengths, tgt_in = _batch(seed)
    changed = tgt_in.clone()
    changed[:, t + 1 :] = torch.randint(3, V_TGT, changed[:, t + 1 :].shape)
    changed[:, t + 1] = (tgt_in[:, t + 1] - 2) % (V_TGT - 3) + 3  # surely different
    with torch.no_grad():
        before = model(src, lengths, tgt_in).logits
        after = model(src, lengths, changed).logits
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=ATOL, rtol=0)
    assert not torch.allclose(after[:, t + 1], before[:, t + 1], atol=1e-3)


@settings(max_examples=12, deadline=None)
@given(extra=st.integers(0, 5), seed=st.integers(0, 2**16), norm_first=st.booleans())
def test_padding_invariance(extra, seed, norm_first):
    """More padding, and garbage ids at padded source positions, change nothing."""
    model = _model(norm_first)
    src, lengths, tgt_in = _batch(seed)
    g = torch.Generator().manual_seed(seed)
    padded = torch.cat([src, torch.zeros(src.size(0), extra, dtype=src.dtype)], dim=1)
    garbage = torch.randint(0, V_SRC, padded.shape, generator=g)
    pads = ~padding_mask(lengths, padded.size(1))[:, 0, 0]  # (B, S + extra)
    padded[pads] = garbage[pads]
    with torch.no_grad():
        expected = model(src, lengths, tgt_in).logits
        got = model(padded, lengths, tgt_in).logits
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_attention_maps():
    model = _model(norm_first=True)
    src, lengths, tgt_in = _batch()
    b, s, t = src.size(0), src.size(1), tgt_in.size(1)
    with torch.no_grad():
        plain = model(src, lengths, tgt_in)
        out = model(src, lengths, tgt_in, need_weights=True)
    assert plain.attentions == {}
    torch.testing.assert_close(out.logits, plain.logits, atol=1e-6, rtol=0)
    maps = out.attentions
    assert sorted(maps) == ["cross", "decoder", "encoder"]
    assert all(len(maps[kind]) == LAYERS for kind in maps)
    assert all(w.shape == (b, H, s, s) for w in maps["encoder"])
    assert all(w.shape == (b, H, t, t) for w in maps["decoder"])
    assert all(w.shape == (b, H, t, s) for w in maps["cross"])
    padded = ~padding_mask(lengths, s)[:, 0, 0]  # (B, S)
    for w in maps["cross"] + maps["encoder"]:
        assert torch.all(w.masked_select(padded[:, None, None, :]) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    for w in maps["decoder"]:
        assert torch.all(w.triu(diagonal=1) == 0)


# -- parameters, sharing, configuration -----------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True, "activation": "gelu", "tie_output": False},
        {"share_embeddings": True, "src_vocab_size": V_TGT},
    ],
    ids=["default", "pre-norm-untied", "shared"],
)
def test_every_parameter_gets_a_gradient(overrides):
    torch.manual_seed(0)
    model = Transformer(_config(dropout=0.1, **overrides))  # training mode, dropout on
    src, lengths, tgt_in = _batch()
    src = src.clamp(max=model.config.src_vocab_size - 1)
    logits = model(src, lengths, tgt_in).logits
    F.cross_entropy(logits.flatten(0, 1), tgt_in.roll(-1, dims=1).flatten()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_sharing_uses_one_storage_and_needs_equal_vocabularies():
    shared = Transformer(_config(share_embeddings=True, tie_output=True, src_vocab_size=V_TGT))
    ptr = shared.tgt_embed.weight.data_ptr()
    assert shared.src_embed.weight.data_ptr() == ptr == shared.output_proj.weight.data_ptr()
    untied = Transformer(_config(tie_output=False))
    pointers = {untied.src_embed.weight.data_ptr(), untied.tgt_embed.weight.data_ptr()}
    assert len(pointers | {untied.output_proj.weight.data_ptr()}) == 3
    count = sum(p.numel() for p in shared.parameters())
    assert sum(p.numel() for p in untied.parameters()) == count + (V_SRC + V_TGT) * D
    assert torch.all(shared.src_embed.weight[0] == 0)  # pad row
    with pytest.raises(ValueError, match="src_vocab_size=13 and tgt_vocab_size=11"):
        TransformerConfig(V_SRC, V_TGT, share_embeddings=True)


def test_base_parameter_count():
    """Base model (Table 3) with a shared 8000 vocabulary: 44.1M in the stacks + 8000 * 512."""
    with torch.device("meta"):
        model = Transformer(TransformerConfig(8000, 8000, share_embeddings=True))
    assert sum(p.numel() for p in model.parameters()) == 48_234_496


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 30}, "d_model=30 is not divisible by num_heads=4"),
        ({"num_decoder_layers": 0}, "num_decoder_layers must be a positive int, got 0"),
        ({"dropout": 1.0}, "dropout must be in \\[0, 1\\), got 1.0"),
        ({"activation": "swish"}, "'swish'"),
        ({"pad_id": 11}, "pad_id=11"),
        ({"d_ff": 2.5}, "d_ff must be a positive int, got 2.5"),
    ],
)
def test_config_errors_name_the_value(overrides, message):
    with pytest.raises(ValueError, match=message):
        _config(**overrides)


def test_input_checks():
    model = _model()
    src, lengths, tgt_in = _batch()
    with pytest.raises(ValueError, match="tgt_in must be"):
        model(src, lengths, tgt_in[:2])
    with pytest.raises(ValueError, match="src_lengths must be"):
        model(src, lengths[:2], tgt_in)


# -- it learns ------------------------------------------------------------------------------------


def _reverse_task(n: int, vocab: int, g: torch.Generator) -> tuple[Tensor, ...]:
    """``src = x + [EOS]``, ``tgt_in = [BOS] + reversed(x)``, ``tgt_out = reversed(x) + [EOS]``."""
    lengths = torch.randint(2, 7, (n,), generator=g)
    t = int(lengths.max()) + 1
    src, tgt_in, tgt_out = (torch.zeros(n, t, dtype=torch.long) for _ in range(3))
    for i, k in enumerate(lengths.tolist()):
        x = torch.randint(3, vocab, (k,), generator=g)
        src[i, :k], src[i, k] = x, 2
        tgt_in[i, 0], tgt_in[i, 1 : k + 1] = 1, x.flip(0)
        tgt_out[i, :k], tgt_out[i, k] = x.flip(0), 2
    return src, lengths + 1, tgt_in, tgt_out


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread (and do not fight other processes for cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_tiny_model_learns_to_reverse():
    torch.manual_seed(0)
    vocab = 13
    config = TransformerConfig(
        vocab,
        vocab,
        d_model=32,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        share_embeddings=True,
    )
    model = Transformer(config)
    src, lengths, tgt_in, tgt_out = _reverse_task(64, vocab, torch.Generator().manual_seed(7))
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98))
    for _ in range(120):
        logits = model(src, lengths, tgt_in).logits
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    # greedy decoding through the step protocol reproduces every reversed sequence
    model.eval()
    with torch.no_grad():
        state = model.init_state(model.encode(src, lengths))
        tokens, predicted = torch.full((src.size(0),), 1), []
        for _ in range(tgt_out.size(1)):
            step = model.step(tokens, state)
            state, tokens = step.state, step.log_probs.argmax(dim=-1)
            predicted.append(tokens)
    predicted = torch.stack(predicted, dim=1)  # (B, T)
    real = tgt_out != 0
    assert torch.equal(predicted[real], tgt_out[real])


@pytest.mark.parametrize("shared", [False, True])
def test_normal_embedding_init_gives_unit_variance_after_the_sqrt_d_scale(shared):
    """embed_init="normal": E ~ N(0, 1/D), so E * sqrt(D) has unit variance (the size of the
    sinusoidal positions); Xavier (the default) draws from U(+-sqrt(6 / (V + D))), far smaller
    for a large vocabulary. Padding rows stay zero and tied matrices stay one tensor."""
    torch.manual_seed(0)
    vocab, d = 3000, 64
    sizes = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d, num_heads=4,
                 num_encoder_layers=1, num_decoder_layers=1, d_ff=32)  # fmt: skip
    sizes["share_embeddings"] = shared
    normal = Transformer(TransformerConfig(**sizes, embed_init="normal"))
    xavier = Transformer(TransformerConfig(**sizes))
    for embed in (normal.src_embed, normal.tgt_embed):
        rows = embed.weight[1:].detach() * d**0.5
        assert abs(rows.std().item() - 1.0) < 0.02 and abs(rows.mean().item()) < 0.01
        assert embed.weight[0].abs().max().item() == 0.0
    bound = (6 / (vocab + d)) ** 0.5
    assert xavier.src_embed.weight.abs().max().item() <= bound
    assert xavier.src_embed.weight[1:].std().item() == pytest.approx(bound / 3**0.5, rel=0.02)
    assert normal.output_proj.weight is normal.tgt_embed.weight
    assert (normal.src_embed is normal.tgt_embed) == shared
    # every other matrix keeps its Xavier bound
    others = [
        (name, p)
        for name, p in normal.named_parameters()
        if p.dim() > 1 and "embed" not in name and "output_proj" not in name
    ]
    assert len(others) >= 10  # attention and feed-forward matrices of every layer
    for name, p in others:
        assert p.abs().max().item() <= (6 / sum(p.shape)) ** 0.5 + 1e-7, name


def test_an_unknown_embedding_init_is_refused():
    with pytest.raises(ValueError, match="embed_init"):
        _config(embed_init="kaiming")

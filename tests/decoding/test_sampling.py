"""Language-model generation: the cache changes nothing, padding changes nothing, sampling never
leaves the top-k / top-p set, seeds reproduce, and the repetition penalty is the paper's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qkv.decoding.sampling import (
    SamplingConfig,
    allowed_tokens,
    apply_repetition_penalty,
    generate,
    next_token,
)
from qkv.models.language_model.model import TransformerLM, TransformerLMConfig

V = 29


@pytest.fixture(scope="module")
def model() -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(TransformerLMConfig.preset("tiny", V, max_len=64, positions="rotary"))


PROMPTS = [[5, 6, 7], [8], [9, 10, 11, 12, 13, 14]]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_cached_generation_equals_uncached_in_tokens_and_logits(model, temperature):
    config = SamplingConfig(max_new_tokens=12, temperature=temperature, top_k=10, seed=3)
    cached = generate(model.eval(), PROMPTS, config, return_logits=True)
    uncached = generate(model, PROMPTS, config, use_cache=False, return_logits=True)
    assert cached.tokens == uncached.tokens
    torch.testing.assert_close(cached.logits, uncached.logits, atol=1e-5, rtol=0)


def test_a_prompt_gets_the_same_tokens_alone_and_in_a_padded_batch(model):
    config = SamplingConfig(max_new_tokens=10, temperature=0.0)
    batched = generate(model.eval(), PROMPTS, config, return_logits=True)
    for row, prompt in enumerate(PROMPTS):
        alone = generate(model, [prompt], config, return_logits=True)
        assert alone.tokens[0] == batched.tokens[row]
        torch.testing.assert_close(alone.logits[0], batched.logits[row], atol=1e-5, rtol=0)


def test_the_same_seed_gives_the_same_text_and_another_seed_other_text(model):
    def run(seed):
        config = SamplingConfig(max_new_tokens=20, temperature=1.5, seed=seed)
        return generate(model.eval(), PROMPTS, config).tokens

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_eos_and_stop_end_a_row_and_only_that_row(model):
    greedy = SamplingConfig(max_new_tokens=8, temperature=0.0)
    free = generate(model.eval(), PROMPTS, greedy)
    eos = free.tokens[0][2]
    out = generate(model, PROMPTS, greedy, eos_id=eos)
    assert out.tokens[0] == free.tokens[0][: free.tokens[0].index(eos)]
    assert out.finished[0] == "eos"
    for row in (1, 2):  # the other rows continue as before unless they produce eos themselves
        if eos in free.tokens[row]:
            end = free.tokens[row].index(eos)
            assert out.tokens[row] == free.tokens[row][:end] and out.finished[row] == "eos"
        else:
            assert out.tokens[row] == free.tokens[row] and out.finished[row] == "length"
    stopped = generate(model, PROMPTS, greedy, stop=lambda row, ids: row == 1 and len(ids) == 3)
    assert stopped.tokens[1] == free.tokens[1][:3] and stopped.finished[1] == "stop"
    assert stopped.tokens[2] == free.tokens[2]


def test_streaming_sees_every_step(model):
    seen = []
    out = generate(
        model.eval(),
        PROMPTS,
        SamplingConfig(max_new_tokens=5, temperature=0.0),
        on_tokens=lambda t: seen.append(t.tolist()),
    )
    assert [[step[r] for step in seen] for r in range(3)] == out.tokens


def reference_allowed(logits: np.ndarray, top_k: int | None, top_p: float) -> set[int]:
    """The allowed set computed independently, in float64 NumPy, from the definitions."""
    order = np.argsort(-logits, kind="stable")
    if top_k is not None:
        order = order[:top_k]
    kept = logits[order]
    probs = np.exp(kept - kept.max())
    probs /= probs.sum()
    allowed, mass = [], 0.0
    for token, p in zip(order, probs, strict=True):
        allowed.append(int(token))
        mass += p
        if mass >= top_p:
            break
    return set(allowed)


@pytest.mark.parametrize("top_k, top_p", [(5, 1.0), (None, 0.7), (8, 0.5), (1, 1.0), (None, 0.05)])
def test_sampling_never_draws_outside_the_allowed_set(top_k, top_p):
    torch.manual_seed(0)
    logits = torch.randn(4, V, dtype=torch.float64) * 2
    config = SamplingConfig(temperature=1.0, top_k=top_k, top_p=top_p)
    generator = torch.Generator().manual_seed(0)
    seq, keep = torch.zeros(4, 1, dtype=torch.long), torch.ones(4, 1, dtype=torch.bool)
    draws = torch.stack([next_token(logits, seq, keep, config, generator) for _ in range(2000)])
    for row in range(4):
        expected = reference_allowed(logits[row].numpy(), top_k, top_p)
        drawn = set(draws[:, row].tolist())
        assert drawn <= expected
        # 2000 draws reach every allowed token of probability >= 1% (a miss: < 1 in 10^8).
        probs = torch.softmax(logits[row, sorted(expected)], -1)
        likely = {t for t, p in zip(sorted(expected), probs.tolist(), strict=True) if p >= 0.01}
        assert likely <= drawn and len(likely) >= 1
        assert set(torch.nonzero(allowed_tokens(logits, top_k, top_p)[row]).flatten().tolist()) == (
            expected
        )


def test_repetition_penalty_by_hand():
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0]])
    sequence = torch.tensor([[0, 1, 3, 1]])  # token 3 sits only in the padding
    keep = torch.tensor([[True, True, False, True]])
    out = apply_repetition_penalty(logits, sequence, keep, 2.0)
    torch.testing.assert_close(out, torch.tensor([[1.0, -2.0, 0.5, -3.0]]))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"temperature": -1}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 0}, "top_p"),
        ({"repetition_penalty": 0.5}, "repetition_penalty"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ],
)
def test_bad_sampling_settings_are_named(values, message):
    with pytest.raises(ValueError, match=message):
        SamplingConfig(**values)


def test_an_empty_prompt_is_an_error(model):
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [[1], []], SamplingConfig())


def test_generation_runs_past_the_context_window_identically_with_and_without_the_cache(model):
    # A 64-token context, 6-token prompts, 150 new tokens: the window shifts several times.
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12]]
    config = SamplingConfig(max_new_tokens=150, temperature=0.0)
    cached = generate(model.eval(), prompts, config, context=64, return_logits=True)
    uncached = generate(model, prompts, config, context=64, use_cache=False, return_logits=True)
    assert [len(t) for t in cached.tokens] == [150, 150]
    assert cached.tokens == uncached.tokens
    torch.testing.assert_close(cached.logits, uncached.logits, atol=1e-4, rtol=0)
    free = generate(model, prompts, SamplingConfig(max_new_tokens=58, temperature=0.0))
    assert [t[:58] for t in cached.tokens] == free.tokens  # nothing changes before the shift
    with pytest.raises(ValueError, match="may have at most 63"):
        generate(model, [list(range(1, 29)) * 3], config, context=64)


@pytest.mark.parametrize(
    "variant",
    [dict(positions="learned"), dict(positions="rotary"), dict(positions="rotary", num_kv_heads=2)],
    ids=["learned", "rotary", "grouped-query"],
)
def test_the_lean_decode_step_equals_the_module_path(variant):
    torch.manual_seed(0)
    lm = TransformerLM(TransformerLMConfig.preset("tiny", V, max_len=40, **variant)).eval()
    config = SamplingConfig(max_new_tokens=60, temperature=0.0)
    for prompts in (PROMPTS, [[5, 6, 7], [8, 9, 10]]):  # padded, and equal lengths (no mask)
        fast = generate(lm, prompts, config, context=40, return_logits=True)
        slow = generate(lm, prompts, config, context=40, return_logits=True, fast_step=False)
        assert fast.tokens == slow.tokens
        torch.testing.assert_close(fast.logits, slow.logits, atol=1e-4, rtol=0)


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_lower_precision_decode_weights_stay_close_to_float32(model, precision):
    config = SamplingConfig(max_new_tokens=30, temperature=0.0)
    full = generate(model.eval(), PROMPTS, config, return_logits=True)
    half = generate(model, PROMPTS, config, return_logits=True, precision=precision)
    # The first step sees the same tokens: its logits differ by bfloat16 rounding only.
    torch.testing.assert_close(half.logits[:, 0], full.logits[:, 0], atol=0.05, rtol=0.02)
    pairs = zip(half.tokens, full.tokens, strict=True)
    agree = sum(a == b for x, y in pairs for a, b in zip(x, y, strict=True))
    assert agree >= 0.8 * sum(map(len, full.tokens))
    with pytest.raises(ValueError, match="precision needs the KV cache"):
        generate(model, PROMPTS, config, use_cache=False, precision=precision)
    with pytest.raises(ValueError, match="precision must be one of"):
        generate(model, PROMPTS, config, precision="float16")


# Frequencies: a scripted model whose next-token probabilities are known, sampled many times.
KNOWN = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])  # next-token probabilities, every step
DRAWS = 20_000


class _Scripted(torch.nn.Module):
    """A causal LM whose next-token distribution is ``KNOWN`` whatever it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.log_probs = torch.nn.Parameter(torch.tensor(np.log(KNOWN)), requires_grad=False)

    def forward(self, ids, *, keep=None, positions=None, caches=None, last_only=False):
        logits = self.log_probs.expand(*ids.shape, len(KNOWN))  # (B, T, V)
        return type("Out", (), {"logits": logits})()

    def new_caches(self, batch, max_len=None, *, dtype=None):
        raise AssertionError("the frequency tests run without a cache")


def expected_frequencies(temperature: float, top_k: int | None, top_p: float) -> np.ndarray:
    """Independently, in float64: ``p^(1/T)`` normalised, then cut to the top-k and the
    smallest top set reaching ``top_p`` of that tempered mass, and normalised again."""
    tempered = KNOWN ** (1 / temperature)
    tempered /= tempered.sum()
    order = np.argsort(-tempered, kind="stable")[: top_k or len(KNOWN)]
    kept = tempered[order] / tempered[order].sum()
    before = np.cumsum(kept) - kept  # the mass ranked above each token
    allowed = order[before < top_p]
    out = np.zeros_like(KNOWN)
    out[allowed] = tempered[allowed] / tempered[allowed].sum()
    return out


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, None, 1.0), (0.5, None, 1.0), (2.0, None, 1.0), (1.0, 3, 1.0), (1.0, None, 0.7),
     (2.0, 4, 0.6)],
)  # fmt: skip
def test_sampled_frequencies_follow_the_tempered_truncated_distribution(temperature, top_k, top_p):
    """20,000 draws: each token's count within 5.5 binomial standard deviations of its expected
    count (a false alarm about 1 in 10^7 per token; the seed is fixed, so the test is
    deterministic); tokens outside the top-k / top-p set never drawn. Ignoring the temperature
    moves the commonest token's count by about 60 (T = 0.5) and 40 (T = 2) standard deviations."""
    config = SamplingConfig(
        max_new_tokens=1, temperature=temperature, top_k=top_k, top_p=top_p, seed=7
    )
    out = generate(_Scripted(), [[1]] * DRAWS, config, use_cache=False)
    counts = np.bincount([tokens[0] for tokens in out.tokens], minlength=len(KNOWN))
    expected = expected_frequencies(temperature, top_k, top_p)
    assert counts[expected == 0].sum() == 0, (counts, expected)
    spread = np.sqrt(DRAWS * expected * (1 - expected))
    deviations = np.abs(counts - DRAWS * expected) / np.where(spread > 0, spread, 1)
    assert deviations.max() < 5.5, (counts, DRAWS * expected)


def test_the_expected_frequencies_by_hand():
    """The reference itself, on values worked out by hand."""
    np.testing.assert_allclose(expected_frequencies(1.0, None, 1.0), KNOWN)
    squared = KNOWN**2 / (KNOWN**2).sum()  # T = 0.5: p^2 normalised
    np.testing.assert_allclose(expected_frequencies(0.5, None, 1.0), squared)
    np.testing.assert_allclose(expected_frequencies(1.0, 3, 1.0), [0.5, 0.3125, 0.1875, 0, 0, 0])
    # top-p 0.7: the mass above tokens 0, 1, 2 is 0, 0.4, 0.65 (< 0.7); above token 3, 0.8.
    np.testing.assert_allclose(expected_frequencies(1.0, None, 0.7), [0.5, 0.3125, 0.1875, 0, 0, 0])

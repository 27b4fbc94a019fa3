"""Generation from a decoder-only language model: greedy or sampled, token by token.

Each step turns the last position's logits into the next token:

1. repetition penalty (Keskar et al. 2019): the logits of tokens already in the sequence are
   divided by ``penalty`` when positive and multiplied by it when negative;
2. temperature: ``logits / T``; ``T = 0`` means greedy (argmax);
3. top-k: only the ``k`` highest-scoring tokens stay;
4. top-p (nucleus, Holtzman et al. 2020): only the smallest set of most probable tokens whose
   probability reaches ``p`` stays;

then a token is drawn from the softmax of what stays, with a ``torch.Generator`` seeded by
``seed`` (the same seed gives the same text). Batched prompts of different lengths are
left-padded and masked, so each row's tokens are those it would get alone.

The KV cache holds every layer's keys and values, preallocated for prompt + new tokens, so a step
feeds one token per row; ``use_cache=False`` recomputes the whole sequence every step (the
reference the cached path is tested against).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import torch
from torch import Tensor

from qkv.attention.core import masked_softmax
from qkv.attention.kv_cache import KVCache
from qkv.config_values import ranged
from qkv.hardware import warn_if_slow_bfloat16_decoding
from qkv.layers.packed_linear import Precision, activation_dtype, check_precision


class CausalLM(Protocol):
    """What :func:`generate` needs of a model (:class:`.TransformerLM` is one)."""

    def __call__(
        self,
        ids: Tensor,
        *,
        keep: Tensor | None = None,
        positions: Tensor | None = None,
        caches: list[KVCache] | None = None,
        last_only: bool = False,
    ): ...

    def new_caches(
        self, batch: int, max_len: int | None = None, *, dtype: torch.dtype | None = None
    ) -> list[KVCache]: ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


class LeanCausalLM(CausalLM, Protocol):
    """A :class:`CausalLM` with a lean decode step (``TransformerLM``): weights prepared once by
    ``decode_weights``, then logits ``(B, V)`` per ``decode_step``."""

    def decode_weights(self, precision: Precision = "float32") -> Any: ...

    def decode_step(
        self, weights: Any, ids: Tensor, caches: list[KVCache], *, keep: Tensor | None = None
    ) -> Tensor: ...


# The most tokens one prompt may ask for: a million tokens of text, hours of CPU generation.
MAX_NEW_TOKENS = 1_000_000


@dataclass(frozen=True)
class SamplingConfig:
    """How to pick each next token (see the module doc for the order they apply in).

    Args:
        max_new_tokens: the most tokens generated per prompt, in ``[1, MAX_NEW_TOKENS]`` (every
            token is kept, so an absurd count would only end when memory does).
        temperature: ``0`` for greedy, else > 0.
        top_k: keep the ``k`` best tokens (``None``: all).
        top_p: keep the smallest nucleus of probability >= ``p``, in ``(0, 1]``.
        repetition_penalty: >= 1 (``1``: none).
        seed: seeds the sampler (``None``: PyTorch's global generator).
    """

    max_new_tokens: int = ranged(100, f"[1, {MAX_NEW_TOKENS}]")
    temperature: float = ranged(1.0, ">= 0")
    top_k: int | None = ranged(None, "null or >= 1")
    top_p: float = ranged(1.0, "(0, 1]")
    repetition_penalty: float = ranged(1.0, ">= 1")
    seed: int | None = ranged(None, "null or [0, 2**64)")

    def __post_init__(self) -> None:
        if not _is_int(self.max_new_tokens) or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise ValueError(
                f"max_new_tokens must be an integer in [1, {MAX_NEW_TOKENS:,}], got "
                f"{self.max_new_tokens!r}"
            )
        if not _is_real(self.temperature) or self.temperature < 0:
            raise ValueError(
                f"temperature must be a finite number > 0, or 0 for greedy, got "
                f"{self.temperature!r}"
            )
        if self.top_k is not None and (not _is_int(self.top_k) or self.top_k < 1):
            raise ValueError(f"top_k must be an integer >= 1 (or None: all), got {self.top_k!r}")
        if not _is_real(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not _is_real(self.repetition_penalty) or self.repetition_penalty < 1.0:
            raise ValueError(
                f"repetition_penalty must be a finite number >= 1 (1: none), got "
                f"{self.repetition_penalty!r}"
            )
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < 2**64):
            raise ValueError(f"seed must be an integer in [0, 2**64) (or None), got {self.seed!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Generation:
    """What :func:`generate` returns.

    Attributes:
        tokens: per prompt, the generated ids (the end-of-sequence id excluded).
        finished: per prompt, why it stopped: ``"eos"``, ``"stop"`` (the ``stop`` callback) or
            ``"length"``.
        logits: ``(B, N, V)`` raw logits of each generated position (with ``return_logits``).
    """

    tokens: list[list[int]]
    finished: list[str]
    logits: Tensor | None = None


def generate(
    model: CausalLM,
    prompts: Sequence[Sequence[int]],
    config: SamplingConfig,
    *,
    eos_id: int | None = None,
    pad_id: int = 0,
    use_cache: bool = True,
    stop: Callable[[int, list[int]], bool] | None = None,
    on_tokens: Callable[[Tensor], None] | None = None,
    return_logits: bool = False,
    device: torch.device | str | None = None,
    context: int | None = None,
    fast_step: bool = True,
    precision: Precision | None = None,
) -> Generation:
    """Continue every prompt (a list of token ids, at least one each) by up to
    ``config.max_new_tokens`` tokens.

    Args:
        eos_id: a row stops after producing it.
        pad_id: the id left-padding uses (masked: its value never matters).
        stop: ``stop(row, generated_ids) -> bool`` after each token, e.g. a stop string check.
        on_tokens: called with the ``(B,)`` tokens of each step (finished rows get ``pad_id``),
            for streaming.
        device: where to run; default: the model's parameters' device.
        context: the most tokens the model reads at once (its ``max_len``). Generation may run
            past it: when the window is full, it keeps its newest half (with the cache: their keys
            and values are recomputed once), and positions restart from 0 at the window's
            start, as in any training window. The uncached path moves the window alike, so
            both give the same tokens. ``None``: no limit.
        precision: the weights of the lean decode step (a model with ``decode_step``, with the
            cache): ``"float32"`` (the default; the same tokens as the module path),
            ``"bfloat16"`` or ``"int8"`` (:mod:`qkv.layers.packed_linear`).
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (got an empty prompt or none)")
    if device is None:
        device = next(model.parameters()).device
    b, longest = len(prompts), max(len(p) for p in prompts)
    if context is not None and longest >= context:
        raise ValueError(
            f"the longest prompt has {longest} tokens; the model reads at most {context}, so a "
            f"prompt may have at most {context - 1}"
        )
    ids, keep = _left_padded(prompts, longest, pad_id, device)  # (B, P) each
    generator = None
    if config.seed is not None:
        generator = torch.Generator(device=device).manual_seed(config.seed)
    capacity = longest + config.max_new_tokens
    if context is not None:
        capacity = min(capacity, context)
    if precision is not None:
        check_precision(precision)
    cache_dtype = None if precision is None else activation_dtype(precision)
    caches = model.new_caches(b, capacity, dtype=cache_dtype) if use_cache else None
    padded = bool((~keep).any())  # equal-length prompts need no mask at all (the fast path)
    # A model with a lean decode step (TransformerLM) uses it, in `precision` if given.
    fast, lean = None, None
    if use_cache and fast_step and hasattr(model, "decode_step"):
        lean = cast(LeanCausalLM, model)  # decode_step comes with decode_weights
        if precision == "bfloat16":
            warn_if_slow_bfloat16_decoding(device, b)
        fast = lean.decode_weights(precision or "float32")
    elif precision is not None:
        raise ValueError("precision needs the KV cache and a model with decode_step")

    sequence, mask = ids, keep  # everything so far: (B, P + n)
    feed = ids  # what the next forward pass reads
    start = 0  # the cache holds sequence[:, start:] (before feed)
    generated: list[list[int]] = [[] for _ in range(b)]
    finished: list[str | None] = [None] * b
    all_logits = []
    with torch.no_grad():
        for _ in range(config.max_new_tokens):
            if sequence.size(1) - start > capacity:  # the context is full: keep its newest half
                start = sequence.size(1) - max(1, capacity // 2)
                if use_cache:
                    feed = sequence[:, start:]
                    caches = model.new_caches(b, capacity, dtype=cache_dtype)
            window = mask[:, start:] if padded else None
            if fast is not None:
                assert lean is not None and caches is not None  # both set with fast
                logits = lean.decode_step(fast, feed, caches, keep=window)  # (B, V)
            elif use_cache:
                logits = model(feed, keep=window, caches=caches, last_only=True).logits[:, -1]
            else:
                logits = model(sequence[:, start:], keep=window, last_only=True).logits[:, -1]
            if return_logits:
                all_logits.append(logits.float())
            token = next_token(logits.float(), sequence, mask, config, generator)  # (B,)
            if any(f is not None for f in finished):
                done = torch.tensor([f is not None for f in finished], device=device)
                token = token.masked_fill(done, pad_id)
            values = token.tolist()
            for row, value in enumerate(values):
                if finished[row] is not None:
                    continue
                if value == eos_id:
                    finished[row] = "eos"
                    continue
                generated[row].append(value)
                if stop is not None and stop(row, generated[row]):
                    finished[row] = "stop"
            if on_tokens is not None:
                on_tokens(token)
            if all(f is not None for f in finished):
                break
            feed = token[:, None]  # (B, 1)
            sequence = torch.cat([sequence, feed], dim=1)
            mask = torch.cat([mask, torch.ones_like(feed, dtype=torch.bool)], dim=1)
    return Generation(
        generated,
        [f or "length" for f in finished],
        torch.stack(all_logits, dim=1) if return_logits else None,
    )


def _left_padded(
    prompts: Sequence[Sequence[int]], longest: int, pad_id: int, device: torch.device | str
) -> tuple[Tensor, Tensor]:
    """The prompts as ``ids (B, P)``, left-padded with ``pad_id`` to ``P = longest``, and their
    keep-mask ``(B, P)`` (``True`` at prompt tokens)."""
    ids = torch.full((len(prompts), longest), pad_id, dtype=torch.long, device=device)
    keep = torch.zeros(len(prompts), longest, dtype=torch.bool, device=device)
    for row, prompt in enumerate(prompts):
        ids[row, longest - len(prompt) :] = torch.as_tensor(list(prompt), device=device)
        keep[row, longest - len(prompt) :] = True
    return ids, keep


def next_token(
    logits: Tensor,
    sequence: Tensor,
    keep: Tensor,
    config: SamplingConfig,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The next token ``(B,)`` from the last position's ``logits (B, V)``; ``sequence (B, S)``
    and ``keep (B, S)`` are the tokens so far (padding excluded from the repetition penalty)."""
    if config.repetition_penalty != 1.0:
        logits = apply_repetition_penalty(logits, sequence, keep, config.repetition_penalty)
    if config.temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / config.temperature
    allowed = allowed_tokens(logits, config.top_k, config.top_p)  # (B, V)
    probs = masked_softmax(logits, allowed)  # disallowed tokens get probability 0
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def apply_repetition_penalty(
    logits: Tensor, sequence: Tensor, keep: Tensor, penalty: float
) -> Tensor:
    """Logits ``(B, V)`` with every token present in the (unpadded) sequence penalised."""
    counts = torch.zeros_like(logits).scatter_add_(1, sequence, keep.to(logits.dtype))
    seen = counts > 0  # (B, V): occurs at least once outside the padding
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def allowed_tokens(logits: Tensor, top_k: int | None, top_p: float) -> Tensor:
    """Boolean ``(B, V)``: the tokens top-k and top-p leave (at least the best one per row)."""
    allowed = torch.ones_like(logits, dtype=torch.bool)
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
        allowed &= logits >= kth
    if top_p < 1.0:
        probs, order = masked_softmax(logits, allowed).sort(dim=-1, descending=True)
        before = probs.cumsum(dim=-1) - probs  # probability mass ranked above each token
        keep_sorted = before < top_p  # the first token always stays (before = 0)
        nucleus = torch.zeros_like(allowed).scatter(1, order, keep_sorted)
        allowed &= nucleus
    return allowed

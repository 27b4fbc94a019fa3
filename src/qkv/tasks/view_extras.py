"""What a runner's token views carry on request (:class:`~qkv.tasks.spec.ViewOptions`): the
query and key vectors behind each weight (the page's neuron view, Vig 2019) and an encoder's
attention rollout and flow (Abnar & Zuidema 2020) as views of their own.

    (tokens, layers), vectors = with_vectors(model, lambda: runner.attention(text))
    view = TokenView(..., vectors=vectors)
    views += summary_views(tokens, layers)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from qkv.attention.flow import MAX_FLOW_TOKENS, attention_flow, flow_fits
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.neuron import head_vectors
from qkv.attention.rollout import attention_rollout
from qkv.tasks.spec import ImageView, Seen, TokenView, ViewOptions, encoder_views

__all__ = ["check_extras", "encoder_token_views", "summary_views", "with_vectors"]

Result = TypeVar("Result")


def with_vectors(
    model: nn.Module, compute: Callable[[], Result]
) -> tuple[Result, list[tuple[Tensor, Tensor]]]:
    """Run ``compute`` (one forward pass of ``model`` on one sequence) and return its result
    with each attention call's query vectors ``(H, Tq, Dk)`` and key vectors ``(Hkv, Tk, Dk)``,
    recomputed from the inputs the call received (:func:`~qkv.attention.neuron.head_vectors`).

    Raises:
        ValueError: the model called no qkv attention module (a model without them, such as a
            BERT encoder or an LSTM, has no vectors to show), or a call used a cache or a batch.
            (A :class:`TokenView` refuses vectors that do not match its layers.)
    """
    calls: list[tuple[MultiHeadAttention, Tensor, Tensor | None, Tensor | None]] = []

    def record(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        assert isinstance(module, MultiHeadAttention)
        if kwargs.get("cache") is not None:
            raise ValueError("the neuron view needs one whole-sequence pass, not a cached one")
        query = args[0] if args else kwargs["query"]
        key = args[1] if len(args) > 1 else kwargs.get("key")
        calls.append((module, query, key, kwargs.get("positions")))

    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    handles = [m.register_forward_pre_hook(record, with_kwargs=True) for m in modules]
    try:
        result = compute()
    finally:
        for handle in handles:
            handle.remove()
    if not calls:
        raise ValueError(
            "the neuron view needs a qkv Transformer's own multi-head attention; this model has "
            "none (a pretrained BERT encoder or an LSTM has no query and key vectors to show)"
        )
    vectors = []
    for module, query, key, positions in calls:
        if query.size(0) != 1:
            raise ValueError(f"the neuron view shows one sequence, got a batch of {query.size(0)}")
        q, k = head_vectors(module, query, key, positions)  # (1, H, Tq, Dk), (1, Hkv, Tk, Dk)
        vectors.append((q[0].float(), k[0].float()))
    return result, vectors


def summary_views(tokens: list[str], layers: list[Tensor]) -> list[TokenView]:
    """An encoder's self-attention ``layers`` (``(H, T, T)`` each) summed up over the stack:
    its attention rollout and, up to :data:`~qkv.attention.flow.MAX_FLOW_TOKENS` tokens, its
    attention flow (both with the papers' residual share 0.5 and head mean), each one
    ``(1, T, T)`` layer whose row ``i`` is how much output ``i`` draws on each input token.
    Above that length the rollout's title says why flow is missing."""
    if not layers:
        return []
    stack = [w[None].float() for w in layers]  # (1, H, T, T) per layer
    with torch.no_grad():
        rollout = attention_rollout(stack)[0]  # (T, T)
    n = len(tokens)
    title = "attention rollout (all layers, heads averaged)"
    if not flow_fits(n, n):
        title += f"; flow not computed: {n} tokens, flow takes at most {MAX_FLOW_TOKENS}"
    axes = ("input token", "output token")
    views = [TokenView("rollout", title, tokens, tokens, [rollout[None]], True, axes)]
    if flow_fits(n, n):
        flow = attention_flow(stack)[0]  # (T, T)
        views.append(
            TokenView("flow", "attention flow (all layers, heads averaged)", tokens, tokens,
                      [flow[None]], True, axes)
        )  # fmt: skip
    return views


def encoder_token_views(
    model: nn.Module,
    attention: Callable[[], tuple[list[str], list[Tensor]]],
    options: ViewOptions,
) -> list[TokenView]:
    """An encoder's self-attention view of the tokens and layers ``attention()`` returns, with
    its query and key vectors when ``options.neuron``, then its rollout and flow views when
    ``options.rollout``."""
    vectors = None
    if options.neuron:
        (tokens, layers), vectors = with_vectors(model, attention)
    else:
        tokens, layers = attention()
    if options.rollout and not layers:
        raise ValueError("this encoder has no self-attention layers to roll out")
    views = encoder_views(tokens, layers, vectors)
    return views + summary_views(tokens, layers) if options.rollout else views


def check_extras(seen: Seen, options: ViewOptions) -> Seen:
    """``seen`` as it is, or a ``ValueError`` when it lacks what ``options`` asked for (a task
    whose runner does not make query and key vectors, or rollout views, ignores the request:
    this turns that silence into an error). A ViT's rollout is a map group of its image view."""
    tokens = [v for v in seen.views if isinstance(v, TokenView)]
    images = [v for v in seen.views if isinstance(v, ImageView)]
    if options.neuron and not any(v.vectors is not None for v in tokens):
        raise ValueError(
            "this model's views carry no query and key vectors: the neuron view is for the "
            "language model and the encoder classifier and tagger; leave out neuron"
        )
    rolled = any(v.id == "rollout" for v in tokens) or any(
        g.name == "rollout" for v in images for g in v.groups
    )
    if options.rollout and not rolled:
        raise ValueError(
            "this model has no rollout view: rollout is for the encoder classifier and tagger "
            "and the Vision Transformer (its flow); leave out rollout"
        )
    return seen

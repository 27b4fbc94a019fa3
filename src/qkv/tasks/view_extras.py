"""What a runner's token views carry on request (:class:`~qkv.tasks.spec.ViewOptions`): the
query and key vectors behind each weight (the page's neuron view, Vig 2019) and an encoder's
attention rollout and flow (Abnar & Zuidema 2020) as views of their own.

    (tokens, layers), vectors = with_vectors(model, lambda: runner.attention(text))
    view = TokenView(..., vectors=vectors)
    views += summary_views(tokens, layers)

    maps, vectors = seq2seq_vectors(model, teacher_forced_pass)   # {"encoder": [(q, k)], ...}

Every runner's ``views`` is wrapped in :func:`checked_views`, so that a request its model cannot
serve is refused rather than ignored; and every runner says beforehand, without running its
model, which of :data:`EXTRAS` its views can add (``runner.extras()``, from
:func:`seq2seq_extras`, :func:`encoder_extras`, :func:`has_heads`: what the explorer offers).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch
from torch import Tensor, nn

from qkv.attention.flow import MAX_FLOW_TOKENS, attention_flow, flow_fits
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.neuron import head_vectors
from qkv.attention.rollout import attention_rollout
from qkv.models.transformer.model import Transformer
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import ViewOptions

__all__ = [
    "EXTRAS",
    "NoExtras",
    "check_extras",
    "checked_views",
    "encoder_extras",
    "encoder_token_views",
    "encoder_views",
    "has_heads",
    "seq2seq_extras",
    "seq2seq_vectors",
    "summary_views",
    "with_vectors",
]

Result = TypeVar("Result")
Views = TypeVar("Views", bound=Callable[..., Seen])
# What a view may add on request (:class:`~qkv.tasks.spec.ViewOptions`' flags of these names).
EXTRAS = ("neuron", "rollout")
NONE: frozenset[str] = frozenset()


def has_heads(model: nn.Module) -> bool:
    """Whether ``model`` holds qkv :class:`MultiHeadAttention` modules: the ones whose query
    and key vectors :func:`with_vectors` records (a BERT encoder or an LSTM holds none)."""
    return any(isinstance(m, MultiHeadAttention) for m in model.modules())


class NoExtras:
    """A runner whose views can add neither of :data:`EXTRAS` (its base class): its attention has
    no query and key heads, nor self-attention layers to roll out."""

    def extras(self) -> frozenset[str]:
        """Which of :data:`EXTRAS` its views can add: none."""
        return NONE


def seq2seq_extras(model: nn.Module) -> frozenset[str]:
    """What an encoder-decoder's views can add: ``neuron`` for a qkv Transformer (what
    :func:`seq2seq_vectors` takes), nothing for an RNN."""
    return frozenset({"neuron"}) if isinstance(model, Transformer) else NONE


def encoder_extras(model: nn.Module, attends: bool) -> frozenset[str]:
    """What an encoder's views (:func:`encoder_token_views`) can add: ``neuron`` when its
    self-attention is qkv's multi-head attention, ``rollout`` when it has self-attention layers
    (``attends``: the config's say, BERT's included)."""
    return frozenset({"neuron"} if has_heads(model) else ()) | (
        frozenset({"rollout"}) if attends else NONE
    )


def with_vectors(
    model: nn.Module, compute: Callable[[], Result]
) -> tuple[Result, list[tuple[Tensor, Tensor]]]:
    """Run ``compute`` (one forward pass of ``model`` on one sequence) and return its result
    with each attention call's query vectors ``(H, Tq, Dk)`` and key vectors ``(Hkv, Tk, Dk)``,
    in call order, recomputed from the inputs the call received
    (:func:`~qkv.attention.neuron.head_vectors`).

    Raises:
        ValueError: the model called no qkv attention module (a model without them, such as a
            BERT encoder or an LSTM, has no vectors to show), or a call used a cache or a batch.
            (A :class:`TokenView` refuses vectors that do not match its layers.)
    """
    result, calls = _recorded(model, compute)
    return result, [pair for _, pair in calls]


def seq2seq_vectors(
    model: nn.Module, forward: Callable[[], Result]
) -> tuple[Result, dict[str, list[tuple[Tensor, Tensor]]]]:
    """Run ``forward``, ONE teacher-forced pass of an encoder-decoder Transformer on one
    (source, ``<s>`` + target) pair, and return its result with the query and key vectors of
    each attention it returns, by kind and layer as
    :meth:`~qkv.models.transformer.model.Transformer.attention_modules` names them
    (``"encoder"``, ``"decoder"``, ``"cross"``): each recorded call is placed by the module that
    made it, not by the order of the calls.

    Decoding (cached steps, or the lean decoder that calls no module) must stay outside
    ``forward``: the vectors explain the weights of this pass, which the views show.

    Raises:
        ValueError: the model is no qkv Transformer (an RNN's additive or multiplicative
            attention has no query and key heads), or an attention module ran other than once.
    """
    if not isinstance(model, Transformer):
        raise ValueError(
            f"the neuron view needs a qkv Transformer's own multi-head attention; this "
            f"{type(model).__name__} has none (an RNN's Bahdanau or Luong attention has no query "
            "and key heads to show); leave out neuron"
        )
    modules = model.attention_modules()
    where = {
        id(m): (kind, index) for kind, layer in modules.items() for index, m in enumerate(layer)
    }
    found: dict[str, list[tuple[Tensor, Tensor] | None]] = {
        kind: [None] * len(layer) for kind, layer in modules.items()
    }
    result, calls = _recorded(model, forward)
    for module, pair in calls:
        if id(module) not in where:
            raise ValueError("an attention module outside the Transformer's layers ran")
        kind, index = where[id(module)]
        if found[kind][index] is not None:
            raise ValueError(
                f"the {kind} attention of layer {index} ran twice: the neuron view needs one "
                "teacher-forced pass"
            )
        found[kind][index] = pair
    vectors: dict[str, list[tuple[Tensor, Tensor]]] = {}
    for kind, pairs in found.items():
        missing = [index for index, pair in enumerate(pairs) if pair is None]
        if missing:
            raise ValueError(f"the {kind} attention of layers {missing} did not run")
        vectors[kind] = [pair for pair in pairs if pair is not None]
    return result, vectors


def _recorded(
    model: nn.Module, compute: Callable[[], Result]
) -> tuple[Result, list[tuple[MultiHeadAttention, tuple[Tensor, Tensor]]]]:
    """``compute()`` and, per attention call in call order, its module and its query
    ``(H, Tq, Dk)`` and key ``(Hkv, Tk, Dk)`` vectors (what :func:`with_vectors` raises)."""
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
            "none (a pretrained BERT encoder or an LSTM has no query and key vectors to show); "
            "leave out neuron"
        )
    vectors = []
    for module, query, key, positions in calls:
        if query.size(0) != 1:
            raise ValueError(f"the neuron view shows one sequence, got a batch of {query.size(0)}")
        q, k = head_vectors(module, query, key, positions)  # (1, H, Tq, Dk), (1, Hkv, Tk, Dk)
        vectors.append((module, (q[0].float(), k[0].float())))
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


def encoder_views(
    tokens: list[str], layers: list[Tensor], vectors: list[tuple[Tensor, Tensor]] | None = None
) -> list[TokenView]:
    """An encoder's self-attention over ``tokens`` as one view (none for an encoder without
    attention layers, such as a BiLSTM without its self-attention layer); ``vectors``: its
    query and key vectors (:attr:`TokenView.vectors`)."""
    if not layers:
        return []
    return [
        TokenView(
            "encoder", "encoder self-attention", tokens, tokens, layers, True, ("key", "query"),
            vectors,
        )
    ]  # fmt: skip


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
        raise ValueError("this encoder has no self-attention layers to roll out; leave out rollout")
    views = encoder_views(tokens, layers, vectors)
    return views + summary_views(tokens, layers) if options.rollout else views


def check_extras(seen: Seen, options: ViewOptions) -> Seen:
    """``seen`` as it is, or a ``ValueError`` when it lacks what ``options`` asked for (a
    runner whose model makes no query and key vectors, or no rollout views, would otherwise
    ignore the request). Every runner's ``views`` calls it (:func:`checked_views`). A ViT's
    rollout is a map group of its image view."""
    tokens = [v for v in seen.views if isinstance(v, TokenView)]
    images = [v for v in seen.views if isinstance(v, ImageView)]
    if options.neuron and not any(v.vectors is not None for v in tokens):
        raise ValueError(
            "this model's views carry no query and key vectors: the neuron view is for qkv "
            "Transformers (the language model, the encoder classifier and taggers, the "
            "translation, summarisation and dialogue Transformers); leave out neuron"
        )
    rolled = any(v.id == "rollout" for v in tokens) or any(
        g.name == "rollout" for v in images for g in v.groups
    )
    if options.rollout and not rolled:
        raise ValueError(
            "this model has no rollout view: rollout is for the encoder classifier and taggers "
            "(tagging, ner) and the Vision Transformer (its flow); leave out rollout"
        )
    return seen


TARGET_TASKS = "translation, summarisation, dialogue and the language model"


def checked_views(views: Views) -> Views:
    """A runner's ``views(item, options=None)`` that refuses, by :func:`check_extras`, the
    ``neuron`` or ``rollout`` its model cannot show, instead of returning views without them;
    and a ``target`` unless the runner's class says it reads one (``takes_target = True``)."""

    @functools.wraps(views)
    def checked(self: Any, item: Any, options: ViewOptions | None = None) -> Seen:
        options = options or ViewOptions()
        if options.target is not None and not getattr(self, "takes_target", False):
            raise ValueError(
                f"target (an output to read instead of the model's own) is for models that "
                f"write text ({TARGET_TASKS}, run by qkv); a {type(self).__name__} reads none: "
                "leave it out"
            )
        return check_extras(views(self, item, options), options)

    return cast(Views, checked)

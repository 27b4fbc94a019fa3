"""Transformer encoder and decoder layers and stacks, Vaswani et al. 2017, section 3.1.

Each sub-layer (attention or the feed-forward network of eq. (2)) sits in a residual connection
with layer normalisation (Ba et al. 2016). The paper normalises after the addition, *post-norm*:

    x = LayerNorm(x + Dropout(Sublayer(x)))                                   (section 3.1, 5.4)

*Pre-norm* (``norm_first=True``; Wang et al. 2019, Xiong et al. 2020) normalises the sub-layer's
input instead and keeps the residual stream un-normalised, so the stack ends with one more
LayerNorm:

    x = x + Dropout(Sublayer(LayerNorm(x)))

Encoder layer: self-attention, then FFN. Decoder layer: masked (causal) self-attention, then
cross-attention over the encoder's output ("memory"), then FFN. Attention is
:class:`qkv.attention.MultiHeadAttention` (section 3.2.2); weights are returned as values, never
stored on the module. The layers follow PyTorch's ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` (same sub-module names, dropout on the attention weights too), so
weights copy across one to one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from torch import Tensor, nn

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import check_keep
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.rotary import RotaryEmbedding
from qkv.layers.feedforward import PositionwiseFeedForward

__all__ = [
    "LayerOutput",
    "StackOutput",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]


@dataclass(frozen=True)
class LayerOutput:
    """What one layer returns.

    Attributes:
        hidden: ``(B, T, D)``.
        self_weights: ``(B, H, T, Tk)`` self-attention weights (``Tk`` counts cached positions), or
            ``None`` unless requested.
        cross_weights: ``(B, H, T, S)`` cross-attention weights (decoder only), or ``None``.
    """

    hidden: Tensor
    self_weights: Tensor | None = None
    cross_weights: Tensor | None = None


@dataclass(frozen=True)
class StackOutput:
    """What a stack returns: the last hidden states and, when requested, one weight per layer."""

    hidden: Tensor
    self_weights: list[Tensor] = field(default_factory=list)
    cross_weights: list[Tensor] = field(default_factory=list)


def _check_sizes(d_model: int, num_heads: int, d_ff: int, dropout: float) -> None:
    if d_model <= 0 or num_heads <= 0 or d_ff <= 0:
        raise ValueError(
            f"d_model, num_heads and d_ff must be positive, got {d_model}, {num_heads}, {d_ff}"
        )
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


class _Residual:
    """The two halves of a residual sub-layer, shared by both layer kinds."""

    norm_first: bool

    def _pre(self, x: Tensor, norm: nn.LayerNorm) -> Tensor:
        """The sub-layer's input: ``LayerNorm(x)`` for pre-norm, ``x`` for post-norm."""
        return norm(x) if self.norm_first else x

    def _post(self, x: Tensor, out: Tensor, norm: nn.LayerNorm, dropout: nn.Dropout) -> Tensor:
        """``x + Dropout(out)``, then ``LayerNorm`` for post-norm (section 3.1)."""
        x = x + dropout(out)
        return x if self.norm_first else norm(x)


class TransformerEncoderLayer(_Residual, nn.Module):
    """Self-attention and a feed-forward network, each in a residual block (section 3.1).

    Args:
        d_model: width ``D``; num_heads: heads ``H`` (a divisor of ``D``); d_ff: FFN hidden width.
        dropout: on each sub-layer's output (the paper's residual dropout, section 5.4), on the
            attention weights and on the FFN's hidden activations, as PyTorch does.
        activation: ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
        norm_first: pre-norm instead of the paper's post-norm.
        layer_norm_eps: the LayerNorm epsilon.
        num_kv_heads: key/value heads for grouped-query attention (default ``num_heads``).
        rotary: a rotary position embedding applied inside self-attention, or ``None``.

    The same layer with ``is_causal=True`` is the block of a decoder-only language model (GPT):
    masked self-attention and an FFN, with a :class:`KVCache` for token-by-token generation.

    Shape:
        ``x``: ``(B, S, D)``; ``keep``: boolean, ``True`` = may attend, broadcastable to
        ``(B, H, S, S)`` (e.g. ``padding_mask(lengths)`` of shape ``(B, 1, 1, S)``; with a cache,
        over the cached keys too); output ``hidden (B, S, D)`` and, when requested,
        ``self_weights (B, H, S, S)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(d_model, num_heads, d_ff, dropout)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, dropout=dropout, num_kv_heads=num_kv_heads, rotary=rotary
        )
        self.ffn = PositionwiseFeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        keep: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> LayerOutput:
        """Encode ``x (B, S, D)``; ``need_weights`` adds the weights without changing ``hidden``.

        ``is_causal``: each position sees only itself and the past (bottom-right aligned, so new
        positions after a ``cache`` see all of it); ``positions``: ``(B, S)`` or ``(S,)`` for the
        rotary embedding."""
        check_keep(keep, "keep")
        attn = self.self_attn(
            self._pre(x, self.norm1),
            keep=keep,
            need_weights=need_weights,
            is_causal=is_causal,
            cache=cache,
            positions=positions,
        )
        x = self._post(x, attn.context, self.norm1, self.dropout1)
        x = self._post(x, self.ffn(self._pre(x, self.norm2)), self.norm2, self.dropout2)
        return LayerOutput(x, attn.weights)


class TransformerDecoderLayer(_Residual, nn.Module):
    """Causal self-attention, cross-attention and a feed-forward network (section 3.1).

    Self-attention is causal (section 3.2.3: "masking out ... all values in the input of the
    softmax which correspond to illegal connections"), aligned bottom-right, so the same call
    serves teacher forcing (``T`` queries, no cache) and incremental decoding (new queries after
    the positions already in ``self_cache``).

    Its arguments are those of :class:`TransformerEncoderLayer`.

    Shape:
        ``x``: ``(B, T, D)``; ``memory``: ``(B, S, D)``; ``memory_keep``: broadcastable to
        ``(B, H, T, S)`` (``(B, 1, 1, S)`` from ``padding_mask``); output ``hidden (B, T, D)``,
        ``self_weights (B, H, T, Tk)`` with ``Tk = T`` plus cached positions, and
        ``cross_weights (B, H, T, S)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        _check_sizes(d_model, num_heads, d_ff, dropout)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        memory_keep: Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> LayerOutput:
        """Decode ``x (B, T, D)`` against ``memory (B, S, D)``.

        Args:
            x: ``(B, T, D)`` target states.
            memory: ``(B, S, D)`` encoder output; ``None`` when ``cross_cache`` is given.
            memory_keep: boolean keep-mask over the source, broadcastable to ``(B, H, T, S)``.
            self_cache: a growing :class:`KVCache`; receives this call's keys and values.
            cross_cache: a static :class:`KVCache` of ``cross_attn.project_kv(memory)``, made once
                per source batch instead of projecting the memory at every step.
            need_weights: also return the self- and cross-attention weights (``hidden`` is the
                same either way).
        """
        if (memory is None) == (cross_cache is None):
            raise ValueError("pass exactly one of memory and cross_cache")
        check_keep(memory_keep, "memory_keep")
        # A single new query is the last position, which may see every key: no causal mask needed
        # (and none to build). Longer blocks get the bottom-right causal mask.
        causal = x.size(1) > 1
        h = self._pre(x, self.norm1)
        sa = self.self_attn(h, is_causal=causal, cache=self_cache, need_weights=need_weights)
        x = self._post(x, sa.context, self.norm1, self.dropout1)
        h = self._pre(x, self.norm2)
        ca = self.cross_attn(
            h, memory, keep=memory_keep, cache=cross_cache, need_weights=need_weights
        )
        x = self._post(x, ca.context, self.norm2, self.dropout2)
        x = self._post(x, self.ffn(self._pre(x, self.norm3)), self.norm3, self.dropout3)
        return LayerOutput(x, sa.weights, ca.weights)


def _final_norm(norm_first: bool, d_model: int, eps: float) -> nn.Module:
    # Pre-norm leaves the residual stream un-normalised: normalise it once at the end of the stack.
    return nn.LayerNorm(d_model, eps=eps) if norm_first else nn.Identity()


class TransformerEncoder(nn.Module):
    """``N`` encoder layers (``N = 6`` in the paper), plus a final LayerNorm when pre-norm.

    Args:
        num_layers: ``N >= 1``; the other arguments are :class:`TransformerEncoderLayer`'s.

    Shape:
        ``x``: ``(B, S, D)`` embedded source; output ``hidden (B, S, D)`` and, when requested,
        ``self_weights``: one ``(B, H, S, S)`` per layer.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        num_kv_heads: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        # A ModuleList yields plain Modules to the type checker; the cast says what this one holds.
        self.layers = cast(
            "Sequence[TransformerEncoderLayer]",
            nn.ModuleList(
                TransformerEncoderLayer(
                    d_model,
                    num_heads,
                    d_ff,
                    dropout=dropout,
                    activation=activation,
                    norm_first=norm_first,
                    layer_norm_eps=layer_norm_eps,
                    num_kv_heads=num_kv_heads,
                    rotary=rotary,
                )
                for _ in range(num_layers)
            ),
        )
        self.norm = _final_norm(norm_first, d_model, layer_norm_eps)

    def forward(
        self,
        x: Tensor,
        *,
        keep: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        caches: list[KVCache] | None = None,
        positions: Tensor | None = None,
    ) -> StackOutput:
        """Encode ``x (B, S, D)`` under the keep-mask ``keep`` (e.g. ``(B, 1, 1, S)``).

        ``is_causal``, ``positions``: as :meth:`TransformerEncoderLayer.forward`; ``caches``: one
        growing :class:`KVCache` per layer (a decoder-only model generating token by token)."""
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"got {len(caches)} caches for {len(self.layers)} layers")
        check_keep(keep, "keep")
        weights = []
        for index, layer in enumerate(self.layers):
            out = layer(
                x,
                keep=keep,
                need_weights=need_weights,
                is_causal=is_causal,
                cache=None if caches is None else caches[index],
                positions=positions,
            )
            x = out.hidden
            if need_weights:
                weights.append(out.self_weights)
        return StackOutput(self.norm(x), weights)


class TransformerDecoder(nn.Module):
    """``N`` decoder layers, plus a final LayerNorm when pre-norm.

    Args:
        num_layers: ``N >= 1``; the other arguments are :class:`TransformerDecoderLayer`'s.

    Shape:
        ``x``: ``(B, T, D)`` embedded target; ``memory``: ``(B, S, D)``; output ``hidden
        (B, T, D)`` and, when requested, ``self_weights`` ``(B, H, T, Tk)`` and ``cross_weights``
        ``(B, H, T, S)``, one per layer.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = cast(  # as the encoder's
            "Sequence[TransformerDecoderLayer]",
            nn.ModuleList(
                TransformerDecoderLayer(
                    d_model,
                    num_heads,
                    d_ff,
                    dropout=dropout,
                    activation=activation,
                    norm_first=norm_first,
                    layer_norm_eps=layer_norm_eps,
                )
                for _ in range(num_layers)
            ),
        )
        self.norm = _final_norm(norm_first, d_model, layer_norm_eps)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        memory_keep: Tensor | None = None,
        self_caches: list[KVCache] | None = None,
        cross_caches: list[KVCache] | None = None,
        need_weights: bool = False,
        need_cross_weights: bool = False,
    ) -> StackOutput:
        """Decode ``x (B, T, D)``; per-layer caches as in :meth:`TransformerDecoderLayer.forward`.

        ``need_weights`` returns every layer's self- and cross-attention weights;
        ``need_cross_weights`` only the last layer's cross-attention weights (what a decoding
        step reports), leaving the other attentions on the fused kernel.
        """
        n = len(self.layers)
        check_keep(memory_keep, "memory_keep")
        for name, caches in (("self_caches", self_caches), ("cross_caches", cross_caches)):
            if caches is not None and len(caches) != n:
                raise ValueError(f"{name} has {len(caches)} caches for {n} layers")
        self_weights, cross_weights = [], []
        for i, layer in enumerate(self.layers):
            last_cross = need_cross_weights and i == n - 1
            out = layer(
                x,
                memory,
                memory_keep=memory_keep,
                self_cache=None if self_caches is None else self_caches[i],
                cross_cache=None if cross_caches is None else cross_caches[i],
                need_weights=need_weights or last_cross,
            )
            x = out.hidden
            if need_weights:
                self_weights.append(out.self_weights)
            if need_weights or last_cross:
                cross_weights.append(out.cross_weights)
        return StackOutput(self.norm(x), self_weights, cross_weights)

"""The decode step of the translation :class:`~qkv.models.transformer.model.Transformer`, lean
enough
for serving on a CPU: what :mod:`qkv.models.language_model.decode` does for the language model,
for an encoder-decoder searched with beams.

The module path (``Transformer.step`` under greedy or beam search) pays per step for generality:
module calls and checks, three projections per self-attention, a growing cache made by
concatenation, and at every reordering of the hypotheses a copy of the whole state (the memory
and every cross-attention key and value included). :class:`LeanTranslationDecoder` computes the
same function with

- one fused query/key/value projection per self-attention and every weight packed for its
  precision's fastest kernel (:mod:`qkv.layers.packed_linear`: float32, bfloat16, int8);
- the cross-attention keys and values projected once per sentence and never copied while the
  sentence decodes: the ``K`` hypotheses of a sentence attend to its source as ``K`` queries of
  one attention call, ``(G, H, K, Dh) x (G, H, S, Dh)`` for ``G`` sentences, so a beam costs no
  copy of the source side and the whole batch of beams is one call per layer;
- self-attention caches allocated once for the longest output, written in place, and reordered
  with one ``index_select`` into a second buffer of the same size (the two are swapped), so no
  step allocates a cache; rows that keep their place are not copied at all (greedy search).

It answers the step protocol (:mod:`qkv.decoding.protocol`), so greedy and beam search run it
unchanged. Its state is consumed by :meth:`~LeanTranslationDecoder.step` and
:meth:`~LeanTranslationDecoder.select_state` (their buffers are reused): step each state once,
as both searches do. ``tests/models/transformer/test_decode.py`` checks that translations
through it equal the module path's token for token in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.attention.core import masked_softmax
from qkv.layers.feedforward import ACTIVATIONS
from qkv.layers.packed_linear import (
    PackedLinear,
    Precision,
    activation_dtype,
    check_precision,
    fused,
    linear,
    pack,
    packed_for,
)
from qkv.models.outputs import StepOutput
from qkv.models.sentence_groups import select_sentences
from qkv.models.transformer.model import Transformer, TransformerEncoding

__all__ = ["LeanTranslationDecoder", "LeanTranslationState", "TranslationDecodeWeights"]


@dataclass(frozen=True)
class _Layer:
    norm1: tuple[Tensor, Tensor]
    self_qkv: PackedLinear  # D -> 3D
    self_out: PackedLinear  # D -> D
    norm2: tuple[Tensor, Tensor]
    cross_q: PackedLinear  # D -> D
    cross_kv: PackedLinear  # D -> 2D, applied to the memory once
    cross_out: PackedLinear  # D -> D
    norm3: tuple[Tensor, Tensor]
    fc1: PackedLinear  # D -> F
    fc2: PackedLinear  # F -> D


def _norm(norm: torch.nn.LayerNorm) -> tuple[Tensor, Tensor]:
    return norm.weight.detach(), norm.bias.detach()


def _packed(linear_: torch.nn.Linear, precision: Precision) -> PackedLinear:
    return pack(linear_.weight, linear_.bias, precision)


class TranslationDecodeWeights:
    """Packed, fused copies of a :class:`Transformer` decoder's weights in ``precision``
    (LayerNorms, the target embedding and the residual stream stay float32)."""

    def __init__(self, model: Transformer, precision: Precision = "float32") -> None:
        if model.copy_head is not None:
            raise ValueError(
                "the lean decode step has no copy head; decode a copying (pointer-generator) "
                "Transformer through its module path"
            )
        self.precision = check_precision(precision)
        self.dtype = activation_dtype(self.precision)
        self.config = model.config
        self.norm_first = model.config.norm_first
        self.layers = []
        for layer in model.decoder.layers:
            sa, ca, ffn = layer.self_attn, layer.cross_attn, layer.ffn
            self.layers.append(
                _Layer(
                    _norm(layer.norm1),
                    fused([sa.q_proj, sa.k_proj, sa.v_proj], self.precision),
                    _packed(sa.out_proj, self.precision),
                    _norm(layer.norm2),
                    _packed(ca.q_proj, self.precision),
                    fused([ca.k_proj, ca.v_proj], self.precision),
                    _packed(ca.out_proj, self.precision),
                    _norm(layer.norm3),
                    _packed(ffn.linear1, self.precision),
                    _packed(ffn.linear2, self.precision),
                )
            )
        final = model.decoder.norm
        self.final_norm = _norm(final) if isinstance(final, torch.nn.LayerNorm) else None
        self.eps = model.decoder.layers[0].norm1.eps
        self.embedding = model.tgt_embed.weight.detach()  # (V, D) float32
        self.scale = model.scale
        self.positional = model.positional
        self.output = pack(model.output_proj.weight, None, self.precision)  # D -> V
        self.activation = ACTIVATIONS[model.config.activation]


@dataclass(frozen=True)
class LeanTranslationState:
    """The decoder state of :class:`LeanTranslationDecoder` for ``R = G * K`` rows: ``G``
    source sentences with ``K`` rows (hypotheses) each, in sentence order.

    Attributes:
        keep: ``(G, 1, 1, S)`` the source keep-mask, one row per sentence.
        bias: ``(G, 1, 1, S)`` float32: 0 where ``keep``, ``-inf`` elsewhere.
        cross: per layer, the sentence's cross-attention keys and values ``(G, H, S, Dh)``.
        self_k, self_v: per layer, ``(R_max, H, capacity, Dh)`` self-attention caches: rows
            ``0 .. R - 1`` are the live ones, and their first ``length`` positions hold keys and
            values. Rows past ``R`` are room left by hypotheses that have gone.
        rows: ``R``, the live rows.
        group: ``K``, rows per sentence.
        length: target tokens fed so far (the next token's position).
        positions: ``(capacity, D)`` float32 sinusoidal encodings of positions ``0 ..``.
        need_attention: whether :meth:`LeanTranslationDecoder.step` reports attention.
    """

    keep: Tensor
    bias: Tensor
    cross: tuple[tuple[Tensor, Tensor], ...]
    self_k: tuple[Tensor, ...]
    self_v: tuple[Tensor, ...]
    rows: int
    group: int
    length: int
    positions: Tensor
    need_attention: bool


class LeanTranslationDecoder:
    """A :class:`Transformer` translation model as a step model with the lean decode step.

    Args:
        model: the Transformer (no copy head), in eval mode.
        precision: ``"float32"`` (the module path's outputs), ``"bfloat16"`` or ``"int8"``.
        max_len: the most tokens any output of the batches to come may have (EOS not counted):
            the self-attention caches hold ``max_len + 1`` positions.
        need_attention: report each step's cross-attention ``(R, S)`` (the last layer's, mean
            over heads), as :meth:`Transformer.step` does; ``False`` skips computing it.
    """

    def __init__(
        self,
        model: Transformer,
        *,
        precision: Precision = "float32",
        max_len: int,
        need_attention: bool = False,
        weights: TranslationDecodeWeights | None = None,
    ) -> None:
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 0:
            raise ValueError(f"max_len must be an int >= 0, got {max_len!r}")
        self.model = model
        self.weights = weights or TranslationDecodeWeights(model, precision)
        if weights is not None and weights.precision != precision:
            raise ValueError(
                f"weights were packed in {weights.precision}, not in the precision "
                f"{precision} asked for"
            )
        self.capacity = max_len + 1
        self.need_attention = need_attention

    def encode(self, src: Tensor, src_lengths: Tensor) -> TransformerEncoding:
        """The module's encoder, once per batch."""
        encoded = self.model.encode(src, src_lengths)
        assert isinstance(encoded, TransformerEncoding)
        return encoded

    def init_state(self, encoded: TransformerEncoding) -> LeanTranslationState:
        """Project the memory ``(G, S, D)`` into each layer's cross-attention keys and values,
        once, and allocate the self-attention caches."""
        w, c = self.weights, self.weights.config
        memory = encoded.memory
        g, s, d = memory.shape
        h, dh = c.num_heads, d // c.num_heads
        flat = memory.reshape(g * s, d).to(w.dtype)
        cross = []
        for layer in w.layers:
            kv = linear(flat, layer.cross_kv).view(g, s, 2, h, dh)
            # Contiguous (G, H, S, Dh): a step's batched products read them without a copy.
            keys, values = kv.permute(2, 0, 3, 1, 4).contiguous()  # (2, G, H, S, Dh)
            cross.append((keys, values))

        where = torch.arange(self.capacity, device=memory.device)
        positions = w.positional.encoding(where, dtype=torch.float32)  # (capacity, D)
        bias = torch.zeros(encoded.keep.shape, device=memory.device)
        bias.masked_fill_(~encoded.keep, -math.inf)  # (G, 1, 1, S)
        return LeanTranslationState(
            encoded.keep, bias, tuple(cross), self._caches(g), self._caches(g), g, 1, 0,
            positions, self.need_attention,
        )  # fmt: skip

    def _caches(self, rows: int) -> tuple[Tensor, ...]:
        """One empty self-attention cache ``(rows, H, capacity, Dh)`` per layer."""
        w, c = self.weights, self.weights.config
        shape = (rows, c.num_heads, self.capacity, c.d_model // c.num_heads)
        return tuple(w.embedding.new_empty(shape, dtype=w.dtype) for _ in w.layers)

    def step(self, tokens: Tensor, state: LeanTranslationState) -> StepOutput:
        """Feed ``tokens (R,)``; log-probabilities ``(R, V)`` (float32) of the next token."""
        w, c = self.weights, self.weights.config
        rows = state.rows
        if tokens.shape != (rows,):
            raise ValueError(f"tokens must be (R={rows},), got shape {tuple(tokens.shape)}")
        t = state.length
        if t >= self.capacity:
            raise ValueError(
                f"step {t + 1} is past the max_len={self.capacity - 1} this decoder was made for"
            )
        d, h = c.d_model, c.num_heads
        dh, g, k = d // h, state.keep.size(0), state.group
        x = w.embedding[tokens] * w.scale + state.positions[t]  # (R, D) float32
        attention = None
        for i, layer in enumerate(w.layers):
            # Self-attention: one fused projection, this position's keys written in place.
            y = self._in(x, layer.norm1)
            qkv = linear(y, layer.self_qkv).view(rows, 3, h, dh)
            keys, values = state.self_k[i][:rows], state.self_v[i][:rows]  # (R, H, cap, Dh)
            keys[:, :, t] = qkv[:, 1]
            values[:, :, t] = qkv[:, 2]
            q = qkv[:, 0, :, None]  # (R, H, 1, Dh)
            context = _attend(q, keys[:, :, : t + 1], values[:, :, : t + 1])  # (R, H, 1, Dh)
            x = self._out(x, linear(context.view(rows, d), layer.self_out), layer.norm1)
            # Cross-attention: the K rows of a sentence are K queries over its source.
            y = self._in(x, layer.norm2)
            q = linear(y, layer.cross_q).view(g, k, h, dh).transpose(1, 2)  # (G, H, K, Dh)
            ck, cv = state.cross[i]
            context = _attend(q, ck, cv, state.bias)  # (G, H, K, Dh)
            if state.need_attention and i == len(w.layers) - 1:
                attention = self._weights(q, ck, state.keep).view(rows, -1)  # (R, S)
            context = context.transpose(1, 2).reshape(rows, d)  # (R, D)
            x = self._out(x, linear(context, layer.cross_out), layer.norm2)
            # Feed-forward.
            y = self._in(x, layer.norm3)
            hidden = w.activation(linear(y, layer.fc1))
            x = self._out(x, linear(hidden, layer.fc2), layer.norm3)
        if w.final_norm is not None:
            x = F.layer_norm(x, (d,), *w.final_norm, w.eps)
        logits = linear(x.to(w.dtype), w.output).float()  # (R, V)
        return StepOutput(logits.log_softmax(dim=-1), replace(state, length=t + 1), attention)

    def _in(self, x: Tensor, norm: tuple[Tensor, Tensor]) -> Tensor:
        """A sub-layer's input in the activation dtype: ``LayerNorm(x)`` (pre-norm) or ``x``."""
        w = self.weights
        if w.norm_first:
            x = F.layer_norm(x, (x.size(-1),), *norm, w.eps)
        return x.to(w.dtype)

    def _out(self, x: Tensor, out: Tensor, norm: tuple[Tensor, Tensor]) -> Tensor:
        """``x + out``, then ``LayerNorm`` for post-norm; float32."""
        w = self.weights
        x = x + out.float()
        return x if w.norm_first else F.layer_norm(x, (x.size(-1),), *norm, w.eps)

    @staticmethod
    def _weights(q: Tensor, keys: Tensor, keep: Tensor) -> Tensor:
        """``(G, K, S)``: the attention weights of queries ``(G, H, K, Dh)`` over ``keys (G, H,
        S, Dh)``, averaged over heads; masked positions get exactly 0."""
        energies = (q.float() @ keys.float().transpose(-1, -2)) * q.size(-1) ** -0.5
        return masked_softmax(energies, keep).mean(dim=1)  # (G, H, K, S) -> (G, K, S)

    def select_state(self, state: LeanTranslationState, index: Tensor) -> LeanTranslationState:
        """Rows ``index (R',)`` of the state. The rows of each sentence must stay together and
        in order of their sentences (what greedy and beam search do); the sentences' source
        sides are selected only when sentences leave or repeat.

        The caches are reordered in place: when every row copied from keeps its place (beam
        search orders its hypotheses so, :func:`~qkv.decoding.beam.slots_in_place`), only the
        rows that change are copied; otherwise the filled part of the live rows is gathered
        once and written back. New buffers are made only for more rows than they hold."""
        rows_before, device = state.rows, index.device
        keep, bias, cross = state.keep, state.bias, state.cross
        runs, group = select_sentences(index, state.group, keep.size(0), type(self).__name__)
        if runs is not None:
            keep, bias = keep.index_select(0, runs), bias.index_select(0, runs)
            cross = tuple((k.index_select(0, runs), v.index_select(0, runs)) for k, v in cross)
        t, rows = state.length, index.numel()
        selected = replace(state, keep=keep, bias=bias, cross=cross, rows=rows, group=group)
        if rows > state.self_k[0].size(0):  # more rows than the buffers hold: new ones
            self_k, self_v = self._caches(rows), self._caches(rows)
            for old, new in zip((*state.self_k, *state.self_v), (*self_k, *self_v), strict=True):
                torch.index_select(old[:rows_before, :, :t], 0, index, out=new[:, :, :t])
            return replace(selected, self_k=self_k, self_v=self_v)
        moved = (index != torch.arange(rows, device=device)).nonzero()[:, 0]  # (M,)
        source = index[moved]
        in_place = bool((index[source] == source).all()) if rows == rows_before else False
        for buffer in (*state.self_k, *state.self_v):
            if in_place:  # the rows copied from stay: copy the moved rows alone
                filled = buffer[:rows, :, :t]  # (R, H, t, Dh)
                filled.index_copy_(0, moved, filled.index_select(0, source))
            elif moved.numel():
                buffer[:rows, :, :t] = buffer[:rows_before, :, :t].index_select(0, index)
        return selected


def _attend(q: Tensor, keys: Tensor, values: Tensor, bias: Tensor | None = None) -> Tensor:
    """Scaled dot-product attention of few queries ``(B, H, Q, Dh)`` over ``keys`` and
    ``values (B, H, L, Dh)``, ``bias (B, 1, 1, L)`` added to the scores: as two batched
    products, which for one query a row cost about half of ``scaled_dot_product_attention``'s
    CPU kernel (built for many)."""
    scores = torch.matmul(q, keys.transpose(-1, -2)).mul_(q.size(-1) ** -0.5)  # (B, H, Q, L)
    if bias is not None:
        scores.add_(bias)
    return torch.matmul(scores.softmax(dim=-1), values)  # (B, H, Q, Dh)


def decode_weights(
    model: Transformer, precision: Precision = "float32"
) -> TranslationDecodeWeights:
    """``model``'s weights packed for :class:`LeanTranslationDecoder` in ``precision``: copies,
    kept on the model until any parameter changes (:func:`~qkv.layers.packed_linear.packed_for`)."""
    return packed_for(model, precision, lambda: TranslationDecodeWeights(model, precision))


def has_lean_step(model: object) -> bool:
    """Whether :class:`LeanTranslationDecoder` can decode ``model``: a Transformer without a
    copy head."""
    return isinstance(model, Transformer) and model.copy_head is None

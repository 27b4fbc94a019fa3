"""A decoder-only Transformer language model (GPT: Radford et al. 2018, 2019).

Masked self-attention that sees only the past, trained to predict the next token:

    h_0 = W_e[x] + W_p[positions]               (learned positions; or RoPE inside attention)
    h_l = h_{l-1} + Attn(LN(h_{l-1}));  h_l = h_l + FFN(LN(h_l))      (pre-norm blocks, GPT-2)
    logits = LN_f(h_N) W_e^T                                         (weights tied)

The blocks are :class:`qkv.layers.TransformerEncoderLayer` run with ``is_causal=True`` on qkv's
attention core; generation keeps one :class:`KVCache` per layer. The layout follows Hugging
Face's ``GPT2LMHeadModel`` so its weights import one to one (:mod:`qkv.interop.gpt2`).

Batched prompts of different lengths are left-padded: ``keep (B, S)`` marks the real tokens
(over the cached ones too), padded keys are masked, and positions count real tokens only, so a
sequence's outputs do not depend on the padding beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import check_keep
from qkv.attention.rotary import RotaryEmbedding
from qkv.config_values import check_choice, check_fractions, check_positive_ints, ranged
from qkv.layers.feedforward import ACTIVATIONS
from qkv.layers.packed_linear import Precision, packed_for
from qkv.layers.positional import LearnedPositionalEmbedding
from qkv.layers.transformer import TransformerEncoder
from qkv.models.language_model.decode import DecodeWeights, decode_step
from qkv.models.outputs import LMOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sizes import check_parameters, transformer_layers

POSITIONS = ("learned", "rotary")
# Named sizes (all of them live in qkv.models.presets), from a CI-sized model to GPT-2 small; the
# vocabulary comes from the tokenizer.
PRESETS = TABLE["transformer_lm"]


@dataclass(frozen=True)
class TransformerLMConfig(Presets, family="transformer_lm", sizes=("vocab_size",)):
    """Sizes of a :class:`TransformerLM`; the defaults are GPT-2 small's (124M parameters).

    Args:
        vocab_size: ``V``; max_len: the longest sequence (the learned position table's rows; for
            rotary positions, the longest sequence allowed).
        d_model: ``D``; num_heads: ``H``; num_kv_heads: key/value heads (grouped-query attention,
            a divisor of ``H``; ``None``: ``H``); num_layers: ``N``; d_ff: FFN width.
        dropout: on embeddings, attention weights, FFN activations and sub-layer outputs.
        positions: ``"learned"`` (GPT-2) or ``"rotary"`` (RoPE, Su et al. 2021).
        activation: ``"gelu_tanh"`` (GPT-2), ``"gelu"`` or ``"relu"``.
        tie_weights: the output projection is the token embedding (GPT-2).
        layer_norm_eps: the LayerNorm epsilon.
    """

    vocab_size: int = 50257
    max_len: int = 1024
    d_model: int = 768
    num_heads: int = 12
    num_layers: int = 12
    d_ff: int = 3072
    num_kv_heads: int | None = ranged(None, "null or >= 1")
    dropout: float = 0.1
    positions: str = "learned"
    activation: str = "gelu_tanh"
    tie_weights: bool = True
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        check_positive_ints(
            self, ("vocab_size", "max_len", "d_model", "num_heads", "num_layers", "d_ff")
        )
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        kv = self.num_kv_heads
        if kv is not None and (kv < 1 or self.num_heads % kv != 0):
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={kv}")
        check_fractions(self, ("dropout",))
        check_choice("positions", self.positions, POSITIONS)
        if self.positions == "rotary" and (self.d_model // self.num_heads) % 2:
            raise ValueError(f"rotary positions need an even head width, got {self.head_dim}")
        check_choice("activation", self.activation, sorted(ACTIVATIONS))
        d = self.d_model
        tables = (self.vocab_size * (1 if self.tie_weights else 2) + self.max_len) * d
        check_parameters(
            self,
            tables + transformer_layers(self.num_layers, d, self.d_ff),
            ("vocab_size", "max_len", "d_model", "d_ff", "num_layers"),
        )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


class TransformerLM(nn.Module):
    """GPT-style decoder-only language model.

    Shape:
        ``ids``: ``(B, T)`` token ids; ``keep``: ``(B, S)`` boolean, ``True`` at real tokens,
        ``S = cached + T`` (``None``: every token is real); ``positions``: ``(B, T)`` (default:
        the count of real tokens before each one); logits ``(B, T, V)``.
    """

    def __init__(self, config: TransformerLMConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.positional = (
            LearnedPositionalEmbedding(c.max_len, c.d_model) if c.positions == "learned" else None
        )
        rotary = RotaryEmbedding(c.head_dim) if c.positions == "rotary" else None
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = TransformerEncoder(
            c.num_layers,
            c.d_model,
            c.num_heads,
            c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            norm_first=True,
            layer_norm_eps=c.layer_norm_eps,
            num_kv_heads=c.num_kv_heads,
            rotary=rotary,
        )
        self.output_proj = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.output_proj.weight = self.embed.weight  # one tensor, (V, D)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """GPT-2's initialisation: N(0, 0.02) for matrices and embeddings, zero biases, unit
        LayerNorms, and the projections that write into the residual stream scaled by
        ``1/sqrt(2N)`` (Radford et al. 2019, section 2.3)."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:  # (embeddings: none)
                    nn.init.zeros_(module.bias)
        residual_std = 0.02 / math.sqrt(2 * self.config.num_layers)
        for block in self.blocks.layers:
            nn.init.normal_(block.self_attn.out_proj.weight, std=residual_std)
            nn.init.normal_(block.ffn.linear2.weight, std=residual_std)

    def decode_weights(self, precision: Precision = "float32") -> DecodeWeights:
        """Weights prepared for :meth:`decode_step` in ``precision`` (``"float32"``,
        ``"bfloat16"`` or ``"int8"``, :mod:`qkv.layers.packed_linear`): copies, kept until any
        parameter changes (:func:`~qkv.layers.packed_linear.packed_for`)."""
        return packed_for(self, precision, lambda: DecodeWeights(self, precision))

    def decode_step(
        self,
        weights: DecodeWeights,
        ids: Tensor,
        caches: list[KVCache],
        *,
        keep: Tensor | None = None,
    ) -> Tensor:
        """Logits ``(B, V)`` after ``ids (B, T)`` (a prompt, or one new token per row); with
        float32 weights equal to ``forward(ids, keep=keep, caches=caches, last_only=True)`` in
        inference mode, and faster."""
        cached, t = caches[0].length, ids.size(1)
        check_keep(keep, "keep")
        positions = default_positions(keep, cached, t, ids.device)  # (T,) or (B, T)
        self._check_length(positions)
        return decode_step(weights, ids, caches, keep=keep, positions=positions)

    def new_caches(
        self, batch: int, max_len: int | None = None, *, dtype: torch.dtype | None = None
    ) -> list[KVCache]:
        """One empty :class:`KVCache` per layer (``max_len``: preallocated capacity)."""
        return [
            block.self_attn.new_cache(batch, max_len, dtype=dtype) for block in self.blocks.layers
        ]

    def forward(
        self,
        ids: Tensor,
        *,
        keep: Tensor | None = None,
        positions: Tensor | None = None,
        caches: list[KVCache] | None = None,
        need_weights: bool = False,
        last_only: bool = False,
    ) -> LMOutput:
        """Next-token logits for every position of ``ids (B, T)`` (``last_only``: for the last
        position only, ``(B, 1, V)``, as generation needs)."""
        if ids.dim() != 2 or ids.size(1) == 0:
            raise ValueError(f"ids must be (B, T) with T >= 1, got shape {tuple(ids.shape)}")
        b, t = ids.shape
        cached = 0 if caches is None else caches[0].length
        check_keep(keep, "keep")
        if keep is not None and keep.shape != (b, cached + t):
            raise ValueError(
                f"keep must be (B, cached + T) = ({b}, {cached + t}), got {tuple(keep.shape)}"
            )
        if positions is None:
            positions = default_positions(keep, cached, t, ids.device)  # (B, T) or (T,)
        self._check_length(positions)
        x = self.embed(ids)  # (B, T, D)
        if self.positional is not None:
            x = x + self.positional.encoding(positions)
        x = self.dropout(x)
        mask = None if keep is None else keep[:, None, None, :]  # (B, 1, 1, S)
        out = self.blocks(
            x,
            keep=mask,
            need_weights=need_weights,
            is_causal=t > 1,  # one new token after a cache may see every cached key
            caches=caches,
            positions=positions,
        )
        hidden = out.hidden[:, -1:] if last_only else out.hidden  # (B, T or 1, D)
        logits = self.output_proj(hidden)  # (B, T, V)
        return LMOutput(logits, {"decoder": out.self_weights} if need_weights else {})

    def _check_length(self, positions: Tensor) -> None:
        if torch.compiler.is_compiling() or positions.numel() == 0:
            return
        last = int(positions.max())
        if last >= self.config.max_len:
            raise ValueError(
                f"sequence too long: position {last} needs max_len > {last}, but this model has "
                f"max_len={self.config.max_len}; shorten the input or the generation"
            )


def default_positions(keep: Tensor | None, cached: int, length: int, device) -> Tensor:
    """Positions of ``length`` new tokens after ``cached`` ones: ``arange`` without padding;
    with ``keep (B, cached + length)``, the number of real tokens before each (padding at 0)."""
    if keep is None:
        return torch.arange(cached, cached + length, device=device)  # (T,)
    counts = keep.long().cumsum(dim=1) - 1  # (B, S)
    return counts[:, cached:].clamp(min=0)  # (B, T)

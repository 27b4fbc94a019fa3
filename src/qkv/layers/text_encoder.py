"""Token ids to contextual states: a Transformer encoder, or a BiLSTM with optional self-attention.

The shared front end of the sequence classifier and the sequence tagger (:mod:`qkv.models`).

* ``"transformer"``: ``Dropout(E[ids] * sqrt(D) + P)`` (Vaswani et al. 2017, sections 3.4-3.5;
  ``P`` learned or sinusoidal) and a post-norm :class:`~qkv.layers.transformer.TransformerEncoder`.
* ``"bilstm"``: a bidirectional LSTM/GRU over packed sequences, ``h_t = [h->_t; h<-_t]`` of width
  ``D`` (``D / 2`` per direction; :class:`~qkv.layers.recurrent.RecurrentEncoder`), optionally
  followed by one multi-head self-attention layer in a residual block,
  ``h = LayerNorm(h + Dropout(MultiHead(h, h, h)))`` (Vaswani et al. 2017, section 3.1).

Both take ``ids (B, T)`` and ``keep (B, T)`` (``True`` at real tokens; sequences are right-padded,
so positions count from 0 in every row) and return a :class:`TextEncoding`. Any module with the
same call, ``encoder(ids, *, keep, need_weights) -> obj with .hidden (B, T, D) and .attentions``
(a pretrained BERT, say), can stand in for them in the models.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from qkv.attention.masks import check_keep
from qkv.attention.multihead import MultiHeadAttention
from qkv.config_values import choice, ranged
from qkv.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from qkv.layers.recurrent import RNN_CELLS, RecurrentEncoder
from qkv.layers.transformer import TransformerEncoder

__all__ = [
    "ENCODERS",
    "POSITIONS",
    "RecurrentTextEncoder",
    "TextEncoderConfig",
    "TextEncoding",
    "TransformerTextEncoder",
    "build_text_encoder",
    "check_inputs",
]

ENCODERS = ("transformer", "bilstm")
POSITIONS = ("learned", "sinusoidal")


@dataclass(frozen=True)
class TextEncoderConfig:
    """Sizes of a text encoder; the classifier's and the tagger's configs nest one (``text``).

    Args:
        vocab_size: ``V``; pad_id: the padding id (its embedding is zero and gets no gradient).
        encoder: ``"transformer"`` or ``"bilstm"``.
        d_model: ``D``, the width of the returned states (for the BiLSTM, both directions
            together, so it must be even; the embeddings are ``D`` wide too).
        num_heads: ``H`` of the Transformer's and of the BiLSTM's self-attention layers.
        num_layers: Transformer layers, or stacked BiLSTM layers.
        d_ff: the Transformer's feed-forward width (unused by the BiLSTM).
        dropout: on embeddings, attention weights, sub-layer outputs (and between RNN layers).
        max_len: the longest sequence accepted (the learned position table's rows).
        positions: ``"learned"`` or ``"sinusoidal"`` (Transformer only; an RNN knows the order).
        self_attention: a self-attention layer over the BiLSTM states (``"bilstm"`` only).
        cell: ``"lstm"`` or ``"gru"`` (``"bilstm"`` only).
    """

    vocab_size: int = ranged(dataclasses.MISSING, ">= 1")
    # No choice stated: the flat model section takes "bert" too (sequence_encoder.from_flat).
    encoder: str = "transformer"
    d_model: int = ranged(256, ">= 1")
    num_heads: int = ranged(4, ">= 1")
    num_layers: int = ranged(2, ">= 1")
    d_ff: int = ranged(1024, ">= 1")
    dropout: float = ranged(0.1, "[0, 1)")
    max_len: int = ranged(512, ">= 1")
    positions: str = choice("learned", POSITIONS)
    self_attention: bool = False
    cell: str = choice("lstm", RNN_CELLS)
    pad_id: int = ranged(0, "[0, vocab_size)")

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.cell not in RNN_CELLS:
            raise ValueError(f"cell must be one of {tuple(RNN_CELLS)}, got {self.cell!r}")
        if not isinstance(self.dropout, int | float) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id!r} must lie in [0, {self.vocab_size})")
        if self.encoder == "bilstm" and self.d_model % 2:
            raise ValueError(
                f"encoder='bilstm' needs an even d_model (two directions of d_model / 2), "
                f"got d_model={self.d_model}"
            )
        if self.self_attention and self.encoder != "bilstm":
            raise ValueError(
                f"self_attention=True adds a layer to encoder='bilstm' only, got "
                f"encoder={self.encoder!r}"
            )
        if self.attends and self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )

    @property
    def attends(self) -> bool:
        """Whether the encoder has self-attention layers (a Transformer, or a BiLSTM with its
        self-attention layer): their weights are the ``attentions`` it returns."""
        return self.encoder == "transformer" or self.self_attention


@dataclass(frozen=True)
class TextEncoding:
    """What a text encoder returns.

    Attributes:
        hidden: ``(B, T, D)`` contextual states; those at padded positions mean nothing.
        attentions: one ``(B, H, T, T)`` self-attention map per layer when requested (empty for a
            BiLSTM without self-attention), else empty.
    """

    hidden: Tensor
    attentions: list[Tensor] = field(default_factory=list)


def check_inputs(ids: Tensor, keep: Tensor | None, vocab_size: int, max_len: int) -> Tensor:
    """Validate ``ids (B, T)`` and ``keep (B, T)``; return ``keep`` (all ``True`` when ``None``).

    Raises:
        ValueError: naming the offending shape or value: ids not ``(B, T)`` integers, an empty
            batch or sequence, ``T > max_len``, an id outside ``[0, vocab_size)``, a ``keep`` of
            the wrong shape or dtype, a row with no real token, or a real token after padding.
    """
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"ids must be a (B, T) integer tensor, got shape {tuple(ids.shape)}, dtype {ids.dtype}"
        )
    b, t = ids.shape
    if b == 0 or t == 0:
        raise ValueError(f"empty input: ids has shape {tuple(ids.shape)}; need B >= 1 and T >= 1")
    if t > max_len:
        raise ValueError(f"sequence of length {t} exceeds max_len={max_len}")
    check_keep(keep, "keep")
    if keep is None:
        keep = torch.ones_like(ids, dtype=torch.bool)
    elif keep.shape != ids.shape:
        raise ValueError(
            f"keep must be a boolean (B, T) = {tuple(ids.shape)} tensor (True = real token), got "
            f"shape {tuple(keep.shape)} and dtype {keep.dtype}"
        )
    if torch.compiler.is_compiling():  # the checks below read values back from the tensors
        return keep
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"token ids range over {low}..{high}, outside [0, {vocab_size})")
    lengths = keep.sum(dim=1)  # (B,)
    if int(lengths.min()) == 0:
        row = int((lengths == 0).nonzero()[0])
        raise ValueError(f"row {row} of keep has no real token; every sequence needs one")
    prefix = torch.arange(t, device=keep.device) < lengths[:, None]  # (B, T)
    if not torch.equal(prefix, keep):
        row = int((prefix != keep).any(dim=1).nonzero()[0])
        raise ValueError(
            f"row {row} of keep is not right-padded (real tokens first, then padding): "
            f"{keep[row].int().tolist()}"
        )
    return keep


class TransformerTextEncoder(nn.Module):
    """Embeddings, positions and a post-norm Transformer encoder stack.

    Matrices start Xavier-uniform (as :class:`qkv.models.transformer.model.Transformer`); the
    learned
    position table keeps its ``N(0, 0.02^2)`` start.

    Shape:
        ``ids (B, T)``, ``keep (B, T)`` -> ``hidden (B, T, D)``, ``attentions`` ``(B, H, T, T)``
        per layer when requested.
    """

    def __init__(self, config: TextEncoderConfig) -> None:
        super().__init__()
        self.config = c = config
        self.output_dim = c.d_model
        self.scale = math.sqrt(c.d_model)  # Vaswani et al. section 3.4
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positional: nn.Module = (
            LearnedPositionalEmbedding(c.max_len, c.d_model, dropout=c.dropout)
            if c.positions == "learned"
            else SinusoidalPositionalEncoding(c.d_model, dropout=c.dropout)
        )
        self.layers = TransformerEncoder(
            c.num_layers, c.d_model, c.num_heads, c.d_ff, dropout=c.dropout
        )
        for p in (self.embed.weight, *self.layers.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():
            self.embed.weight[c.pad_id].zero_()

    def forward(
        self, ids: Tensor, *, keep: Tensor | None = None, need_weights: bool = False
    ) -> TextEncoding:
        keep = check_inputs(ids, keep, self.config.vocab_size, self.config.max_len)
        x = self.positional(self.embed(ids) * self.scale)  # (B, T, D)
        out = self.layers(x, keep=keep[:, None, None, :], need_weights=need_weights)
        return TextEncoding(out.hidden, out.self_weights)


class RecurrentTextEncoder(nn.Module):
    """A BiLSTM (or BiGRU) over packed sequences, optionally followed by self-attention.

    Packing makes every state independent of the padding beside it; the states at padded
    positions are zero before the self-attention layer.

    Shape:
        ``ids (B, T)``, ``keep (B, T)`` (right-padded) -> ``hidden (B, T, D)``, ``attentions``
        ``[(B, H, T, T)]`` with self-attention when requested.
    """

    def __init__(self, config: TextEncoderConfig) -> None:
        super().__init__()
        self.config = c = config
        self.output_dim = c.d_model
        self.rnn = RecurrentEncoder(
            c.vocab_size,
            c.d_model,
            c.d_model // 2,
            num_layers=c.num_layers,
            cell=c.cell,
            dropout=c.dropout,
            pad_id=c.pad_id,
        )
        self.self_attn: MultiHeadAttention | None
        if c.self_attention:
            self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, dropout=c.dropout)
            self.dropout = nn.Dropout(c.dropout)
            self.norm = nn.LayerNorm(c.d_model)
        else:
            self.self_attn = None

    def forward(
        self, ids: Tensor, *, keep: Tensor | None = None, need_weights: bool = False
    ) -> TextEncoding:
        keep = check_inputs(ids, keep, self.config.vocab_size, self.config.max_len)
        hidden = self.rnn(ids, keep.sum(dim=1)).memory  # (B, T, D)
        if self.self_attn is None:
            return TextEncoding(hidden)
        attn = self.self_attn(hidden, keep=keep[:, None, None, :], need_weights=need_weights)
        hidden = self.norm(hidden + self.dropout(attn.context))  # (B, T, D)
        return TextEncoding(hidden, [attn.weights] if need_weights else [])


def build_text_encoder(config: TextEncoderConfig) -> TransformerTextEncoder | RecurrentTextEncoder:
    """The encoder ``config.encoder`` names."""
    if config.encoder == "transformer":
        return TransformerTextEncoder(config)
    return RecurrentTextEncoder(config)

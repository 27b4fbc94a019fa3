"""A BERT encoder (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers"),
laid out as Hugging Face's ``BertModel`` so its weights import one to one (:mod:`qkv.interop.bert`).

    h_0 = LayerNorm(W_word[x] + W_pos[t] + W_type[s])        (section 3, "Input/Output
                                                                Representations", figure 2)
    h_l = LN(h' + FFN(h')),  h' = LN(h_{l-1} + Attn(h_{l-1}))   (post-norm blocks, Vaswani et al.)
    pooled = tanh(W_p h_N[:, 0] + b_p)                       (the [CLS] token, section 3)

The blocks are :class:`qkv.layers.TransformerEncoderLayer` with ``norm_first=False`` and the exact
(erf) GELU, running on qkv's attention core. Positions are absolute, ``0 .. T-1``; sequences are
right-padded and ``keep (B, T)`` marks the real tokens, so a padded key is never attended to and
a sentence's real outputs do not depend on the padding beside it.

:meth:`BertEncoder.packed_hidden` computes the same hidden states for inference only, faster: it
runs on the real tokens alone (no work on padding) with one fused query/key/value product per
layer (:mod:`qkv.models.bert.fast`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.masks import check_keep
from qkv.config_values import check_choice, check_fractions, check_positive_ints, ranged
from qkv.layers.feedforward import ACTIVATIONS
from qkv.layers.transformer import TransformerEncoder
from qkv.models.outputs import BertOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sizes import check_parameters, transformer_layers

# Named sizes (all of them live in qkv.models.presets): all-MiniLM-L6-v2's encoder, BERT base, a
# test size.
PRESETS = TABLE["bert"]


@dataclass(frozen=True)
class BertConfig(Presets, family="bert"):
    """Sizes of a :class:`BertEncoder`; the defaults are BERT base's (110M parameters).

    Args:
        vocab_size: ``V``; hidden_size: ``D``; num_layers: ``N``; num_heads: ``H`` (a divisor of
            ``D``); intermediate_size: the FFN width.
        max_position_embeddings: rows of the position table, the longest input.
        type_vocab_size: segment types (2: sentence A and B).
        layer_norm_eps: the LayerNorm epsilon (1e-12 in BERT).
        activation: ``"gelu"`` (exact erf GELU, Hugging Face's ``"gelu"``), ``"gelu_tanh"`` or
            ``"relu"``.
        dropout: on the embeddings and on each sub-layer's output (``hidden_dropout_prob``).
        attention_dropout: on the attention weights (``attention_probs_dropout_prob``).
        pad_token_id: the padding token (its embedding row gets no gradient).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = ranged(1e-12, "> 0")
    activation: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    pad_token_id: int = ranged(0, "[0, vocab_size)")

    def __post_init__(self) -> None:
        check_positive_ints(
            self,
            ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
             "max_position_embeddings", "type_vocab_size"),
        )  # fmt: skip
        if self.hidden_size % self.num_heads != 0:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}"
            )
        check_fractions(self, ("dropout", "attention_dropout"))
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        check_choice("activation", self.activation, sorted(ACTIVATIONS))
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id must be in [0, vocab_size={self.vocab_size}), "
                f"got {self.pad_token_id!r}"
            )
        rows = self.vocab_size + self.max_position_embeddings + self.type_vocab_size
        check_parameters(
            self,
            rows * self.hidden_size
            + transformer_layers(self.num_layers, self.hidden_size, self.intermediate_size),
            ("vocab_size", "max_position_embeddings", "hidden_size", "intermediate_size",
             "num_layers"),
        )  # fmt: skip

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


class BertEncoder(nn.Module):
    """BERT's embeddings, post-norm Transformer encoder and pooler.

    Shape:
        ``ids``: ``(B, T)`` token ids, ``T <= max_position_embeddings``; ``keep``: ``(B, T)``
        boolean, ``True`` at real tokens (``None``: all real); ``token_type_ids``: ``(B, T)``
        (``None``: all 0). Output ``hidden (B, T, D)``, ``pooled (B, D)`` and, with
        ``need_weights``, one ``(B, H, T, T)`` weight per layer.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.embed_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = TransformerEncoder(
            c.num_layers,
            c.hidden_size,
            c.num_heads,
            c.intermediate_size,
            dropout=c.dropout,
            activation=c.activation,
            norm_first=False,
            layer_norm_eps=c.layer_norm_eps,
        )
        for layer in self.encoder.layers:
            # BERT drops attention weights at its own rate and never drops the FFN's hidden
            # activations; the shared layer takes one rate for all three, so set these two here.
            layer.self_attn.dropout = c.attention_dropout
            layer.ffn.dropout.p = 0.0
        self.pooler = nn.Linear(c.hidden_size, c.hidden_size)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """BERT's initialisation: N(0, 0.02) for matrices and embeddings, zero biases and padding
        row, unit LayerNorms."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        with torch.no_grad():
            self.word_embeddings.weight[self.config.pad_token_id].zero_()

    def embed(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """``h_0 = LayerNorm(W_word[ids] + W_pos[0..T-1] + W_type[types])``, then dropout:
        ``(B, T) -> (B, T, D)``."""
        t = ids.size(1)
        x = self.word_embeddings(ids) + self.position_embeddings.weight[:t]  # (B, T, D)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.embed_norm(x))

    def forward(
        self,
        ids: Tensor,
        *,
        keep: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        need_weights: bool = False,
    ) -> BertOutput:
        """Contextual states of ``ids (B, T)``; ``need_weights`` adds every layer's attention
        weights without changing ``hidden``."""
        self.check_inputs(ids, keep, token_type_ids)
        x = self.embed(ids, token_type_ids)  # (B, T, D)
        mask = None if keep is None else keep[:, None, None, :]  # (B, 1, 1, T)
        out = self.encoder(x, keep=mask, need_weights=need_weights)
        hidden = out.hidden  # (B, T, D)
        pooled = torch.tanh(self.pooler(hidden[:, 0]))  # (B, D)
        return BertOutput(hidden, pooled, out.self_weights if need_weights else None)

    def fast_weights(self):
        """The weights prepared for :meth:`packed_hidden`: copies, kept until any parameter
        changes (every in-place update moves a tensor's version counter)."""
        from qkv.models.bert.fast import FastWeights

        key = tuple((p.data_ptr(), p._version, p.device) for p in self.parameters())
        cached = getattr(self, "_fast_weights", None)
        if cached is None or cached[0] != key:
            cached = (key, FastWeights(self))
            self._fast_weights = cached
        return cached[1]

    @torch.inference_mode()
    def packed_hidden(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The hidden states of the real tokens only, for inference; equal to
        ``forward(ids, keep=...).hidden[keep]`` and faster (see :mod:`qkv.models.bert.fast`).

        Args:
            ids: ``(B, T)`` right-padded token ids (segment type 0).
            lengths: ``(B,)`` real tokens per row, each in ``[1, T]``.

        Returns:
            ``(L, D)`` with ``L = lengths.sum()``: row ``b``'s tokens, then row ``b + 1``'s.
        """
        from qkv.models.bert.fast import packed_hidden

        if lengths.shape != ids.shape[:1] or lengths.dtype.is_floating_point:
            raise ValueError(
                f"lengths must be integers of shape (B,) = ({ids.size(0)},), got "
                f"{lengths.dtype} of shape {tuple(lengths.shape)}"
            )
        if ids.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > ids.size(1)):
            raise ValueError(
                f"lengths must lie in [1, T={ids.size(1)}], got min {int(lengths.min())} and "
                f"max {int(lengths.max())}"
            )
        self.check_inputs(ids, None, None)
        return packed_hidden(self, ids, lengths)

    def check_inputs(self, ids: Tensor, keep: Tensor | None, token_type_ids: Tensor | None) -> None:
        """Raise ``ValueError`` naming the bad shape or value."""
        c = self.config
        if ids.dim() != 2 or ids.size(0) == 0 or ids.size(1) == 0:
            raise ValueError(f"ids must be (B, T) with B, T >= 1, got shape {tuple(ids.shape)}")
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"ids must be integer token ids, got dtype {ids.dtype}")
        if ids.size(1) > c.max_position_embeddings:
            raise ValueError(
                f"sequence too long: {ids.size(1)} tokens, but this model has "
                f"max_position_embeddings={c.max_position_embeddings}; truncate the input"
            )
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= c.vocab_size:
            raise ValueError(
                f"token ids must lie in [0, vocab_size={c.vocab_size}), got min {low}, max {high}"
            )
        check_keep(keep, "keep")
        if keep is not None and keep.shape != ids.shape:
            raise ValueError(
                f"keep must be boolean of shape (B, T) = {tuple(ids.shape)}, got {keep.dtype} "
                f"of shape {tuple(keep.shape)}"
            )
        if token_type_ids is not None:
            if token_type_ids.shape != ids.shape:
                raise ValueError(
                    f"token_type_ids must have the shape of ids {tuple(ids.shape)}, got "
                    f"{tuple(token_type_ids.shape)}"
                )
            low, high = int(token_type_ids.min()), int(token_type_ids.max())
            if low < 0 or high >= c.type_vocab_size:
                raise ValueError(
                    f"token_type_ids must lie in [0, type_vocab_size={c.type_vocab_size}), "
                    f"got min {low}, max {high}"
                )

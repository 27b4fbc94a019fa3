"""The Transformer encoder-decoder of Vaswani et al. 2017, "Attention Is All You Need", section 3.

    src (B, S)                                   tgt_in (B, T)
        |                                            |
    Embedding * sqrt(D)   (3.4)                  Embedding * sqrt(D)   (3.4, shareable)
    + sinusoidal PE, dropout (3.5)               + sinusoidal PE, dropout (3.5)
        |                                            |
    +---v----------------------+                 +---v-------------------------------+
    | self-attention (keep)    |  x N            | causal self-attention  [KVCache]  |  x N
    | feed-forward (eq. 2)     |                 | cross-attention  <-----+ [static] |
    +---+----------------------+                 | feed-forward (eq. 2)   |          |
        |                                        +---+--------------------|----------+
    memory (B, S, D) -----------------------------------------------------+
                                                     |
                                                 Linear (tied to the target embedding, 3.4)
                                                     |
                                                 logits (B, T, V)

Each sub-layer is ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-norm, the paper) or
``x + Dropout(Sublayer(LayerNorm(x)))`` with a final LayerNorm (pre-norm, ``norm_first=True``);
see :mod:`qkv.layers.transformer`.

Copying (``copy=True``): See et al. 2017's pointer-generator (:mod:`qkv.layers.copy`), with the
decoder's last hidden state as ``s_t``, the target embedding (positions added) as ``x_t`` and the
encoder output as the states it copies from; ``coverage=True`` adds coverage. Copying needs one
vocabulary (``src_vocab_size == tgt_vocab_size``); ``src_ext`` and extended ids are read as in
:class:`qkv.models.seq2seq_rnn.Seq2SeqRNN`.

Decoding uses the step protocol of :mod:`qkv.decoding.protocol`: :meth:`Transformer.encode` runs
the encoder once; :meth:`Transformer.init_state` projects the memory into one static
cross-attention cache per layer, once; each :meth:`Transformer.step` feeds one token and appends
its keys and values to one growing self-attention cache per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from qkv.attention.kv_cache import KVCache
from qkv.attention.masks import padding_mask
from qkv.attention.multihead import MultiHeadAttention
from qkv.layers.copy import (
    CopyEncoding,
    CopyHead,
    CopyState,
    copy_encoding,
    extended_log_probs,
    fed_ids,
)
from qkv.layers.positional import SinusoidalPositionalEncoding
from qkv.layers.transformer import TransformerDecoder, TransformerEncoder
from qkv.models.outputs import Seq2SeqOutput, StepOutput
from qkv.models.transformer.config import TransformerConfig

__all__ = ["Transformer", "TransformerConfig", "TransformerEncoding", "TransformerState"]


@dataclass(frozen=True)
class TransformerEncoding:
    """What :meth:`Transformer.encode` returns.

    Attributes:
        memory: ``(B, S, D)`` encoder output.
        keep: ``(B, 1, 1, S)`` boolean source keep-mask (``True`` = real token).
    """

    memory: Tensor
    keep: Tensor


@dataclass(frozen=True)
class TransformerState:
    """The decoder state between steps.

    :meth:`Transformer.step` appends to ``self_caches`` in place and returns a state with the next
    ``position``: step each state once, and branch with :meth:`Transformer.select_state` (which
    copies).

    Attributes:
        memory: ``(B, S, D)`` encoder output; keep: ``(B, 1, 1, S)`` source keep-mask.
        self_caches: one growing self-attention :class:`KVCache` per decoder layer.
        cross_caches: one static cross-attention :class:`KVCache` per decoder layer (the memory's
            keys and values, projected once).
        position: number of target tokens fed so far (the next token's position).
        need_attention: whether :meth:`Transformer.step` reports its cross-attention.
    """

    memory: Tensor
    keep: Tensor
    self_caches: tuple[KVCache, ...]
    cross_caches: tuple[KVCache, ...]
    position: int = 0
    need_attention: bool = True


class Transformer(nn.Module):
    """The encoder-decoder Transformer (section 3), batch-first.

    Args:
        config: a :class:`TransformerConfig`.

    Shape:
        ``src``: ``(B, S)`` ids, right-padded; ``src_lengths``: ``(B,)``; ``tgt_in``: ``(B, T)``
        ids (BOS + target); logits ``(B, T, V)``.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.scale = math.sqrt(c.d_model)  # section 3.4: embeddings are multiplied by sqrt(D)
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        )
        self.positional = SinusoidalPositionalEncoding(c.d_model, dropout=c.dropout)
        options: dict[str, Any] = {
            "dropout": c.dropout,
            "activation": c.activation,
            "norm_first": c.norm_first,
        }
        self.encoder = TransformerEncoder(
            c.num_encoder_layers, c.d_model, c.num_heads, c.d_ff, **options
        )
        self.decoder = TransformerDecoder(
            c.num_decoder_layers, c.d_model, c.num_heads, c.d_ff, **options
        )
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_output:
            self.output_proj.weight = self.tgt_embed.weight  # one tensor, (V, D)
        self.copy_head = (
            CopyHead(c.d_model, c.d_model, c.d_model, attention_dim=c.d_model,
                     coverage=c.coverage)
            if c.copy
            else None
        )  # fmt: skip
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform for every matrix (as ``nn.Transformer`` and the Annotated Transformer),
        the embeddings as ``config.embed_init`` says.

        Shared matrices are visited once (``parameters()`` yields each tensor once). The padding
        rows are zeroed afterwards, as ``nn.Embedding(padding_idx=...)`` would have them.
        """
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if self.config.embed_init == "normal":
            for embedding in {id(e): e for e in (self.src_embed, self.tgt_embed)}.values():
                nn.init.normal_(embedding.weight, std=self.config.d_model**-0.5)
        with torch.no_grad():
            self.src_embed.weight[self.config.pad_id].zero_()
            self.tgt_embed.weight[self.config.pad_id].zero_()

    def attention_modules(self) -> dict[str, list[MultiHeadAttention]]:
        """The module behind each attention :meth:`forward` returns, by the same kind and
        layer: ``"encoder"`` (each encoder layer's self-attention), ``"decoder"`` (each decoder
        layer's causal self-attention) and ``"cross"`` (each decoder layer's cross-attention).
        What the neuron view maps each recorded call to (:mod:`qkv.tasks.view_extras`)."""
        return {
            "encoder": [layer.self_attn for layer in self.encoder.layers],
            "decoder": [layer.self_attn for layer in self.decoder.layers],
            "cross": [layer.cross_attn for layer in self.decoder.layers],
        }

    # -- embeddings -------------------------------------------------------------------------------

    def embed_source(self, src: Tensor) -> Tensor:
        """``(B, S)`` ids -> ``(B, S, D)``: ``Dropout(E[src] * sqrt(D) + PE)``."""
        return self.positional(self.src_embed(src) * self.scale)

    def embed_target(self, tgt: Tensor, offset: int = 0) -> Tensor:
        """``(B, T)`` ids at positions ``offset ..`` -> ``(B, T, D)``."""
        return self.positional(self.tgt_embed(tgt) * self.scale, offset)

    # -- teacher forcing --------------------------------------------------------------------------

    def encode(
        self, src: Tensor, src_lengths: Tensor, src_ext: Tensor | None = None
    ) -> TransformerEncoding | CopyEncoding:
        """Run the encoder once over ``src (B, S)`` with true lengths ``(B,)``; a copying model
        also keeps ``src_ext (B, S)``, the source's extended ids (default ``src``)."""
        return self._with_ext(self._encode(src, src_lengths, need_weights=False)[0], src, src_ext)

    def _with_ext(
        self, encoding: TransformerEncoding, src: Tensor, src_ext: Tensor | None
    ) -> TransformerEncoding | CopyEncoding:
        return copy_encoding(
            encoding, src, src_ext, copying=self.copy_head is not None,
            vocab_size=self.config.src_vocab_size, unk_id=self.config.unk_id,
        )  # fmt: skip

    def _fed(self, tokens: Tensor) -> Tensor:
        """``tokens`` with extended ids (``>= V``, copied words) fed as ``unk_id``."""
        if self.copy_head is None:
            return tokens
        return fed_ids(tokens, self.config.tgt_vocab_size, self.config.unk_id)

    def forward(
        self,
        src: Tensor,
        src_lengths: Tensor,
        tgt_in: Tensor,
        *,
        src_ext: Tensor | None = None,
        need_weights: bool = False,
    ) -> Seq2SeqOutput:
        """Logits for every target position (teacher forcing).

        Args:
            src: ``(B, S)`` source ids, right-padded; src_lengths: ``(B,)`` true lengths.
            tgt_in: ``(B, T)`` decoder inputs ([BOS] + target). Padding at the end needs no mask:
                the causal mask keeps every real position from seeing it.
            src_ext: ``(B, S)`` the source's extended ids, for a copying model (default
                ``src``); ``tgt_in`` may then hold extended ids, fed as ``unk_id``.
            need_weights: also return ``attentions`` (the logits are the same either way):
                ``"encoder"`` ``(B, H, S, S)``, ``"decoder"`` ``(B, H, T, T)`` and ``"cross"``
                ``(B, H, T, S)``, one per layer.

        Returns:
            :class:`Seq2SeqOutput` with ``logits (B, T, V)`` and a copying model's copy head
            output.
        """
        if tgt_in.dim() != 2 or tgt_in.size(0) != src.size(0):
            raise ValueError(
                f"tgt_in must be (B={src.size(0)}, T) token ids, got shape {tuple(tgt_in.shape)}"
            )
        encoding, enc_weights = self._encode(src, src_lengths, need_weights=need_weights)
        encoded = self._with_ext(encoding, src, src_ext)
        x = self.embed_target(self._fed(tgt_in))  # (B, T, D)
        out = self.decoder(x, encoding.memory, memory_keep=encoding.keep, need_weights=need_weights)
        logits = self.output_proj(out.hidden)  # (B, T, V)
        copy = None
        if isinstance(encoded, CopyEncoding) and self.copy_head is not None:
            source = self.copy_head.prepare(
                encoding.memory, encoding.keep, encoded.ext, self.config.tgt_vocab_size
            )
            copy, _ = self.copy_head(out.hidden, x, source)
        if not need_weights:
            return Seq2SeqOutput(logits, copy=copy)
        attentions = {
            "encoder": enc_weights,
            "decoder": out.self_weights,
            "cross": out.cross_weights,
        }
        return Seq2SeqOutput(logits, attentions, copy=copy)

    def _encode(
        self, src: Tensor, src_lengths: Tensor, *, need_weights: bool
    ) -> tuple[TransformerEncoding, list[Tensor]]:
        if src.dim() != 2 or src.dtype.is_floating_point:
            raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
        if src_lengths.shape != (src.size(0),):
            raise ValueError(
                f"src_lengths must be (B={src.size(0)},), got shape {tuple(src_lengths.shape)}"
            )
        keep = padding_mask(src_lengths.to(src.device), src.size(1))  # (B, 1, 1, S)
        out = self.encoder(self.embed_source(src), keep=keep, need_weights=need_weights)
        return TransformerEncoding(out.hidden, keep), out.self_weights

    # -- the step protocol (qkv.decoding.protocol.StepModel) ---------------------------------------

    def init_state(
        self,
        encoded: TransformerEncoding | CopyEncoding,
        *,
        max_len: int | None = None,
        need_attention: bool = True,
    ) -> TransformerState | CopyState:
        """Project the memory into each layer's static cross-attention cache, once.

        Args:
            encoded: what :meth:`encode` returned.
            max_len: preallocate the self-attention caches for this many steps (written in place;
                stepping past it raises); ``None`` grows them by concatenation.
            need_attention: report each step's cross-attention (``StepOutput.attention``). Only
                the last layer computes weights (its two attentions leave the fused kernel): about
                1.5% of a step for the base model and 4% for a 64-wide one (CPU, 8 rows, 30 source
                tokens). ``False`` keeps every attention fused.

        A copying model's state is a :class:`~qkv.layers.copy.CopyState`: this state and the
        copy head's prepared source.
        """
        if isinstance(encoded, CopyEncoding):
            assert self.copy_head is not None  # only a copying model's encode makes one
            inner = self.init_state(encoded.inner, max_len=max_len, need_attention=need_attention)
            source = self.copy_head.prepare(
                encoded.inner.memory, encoded.inner.keep, encoded.ext, self.config.tgt_vocab_size
            )
            return CopyState(inner, source)
        memory, batch = encoded.memory, encoded.memory.size(0)
        cross, own = [], []
        for layer in self.decoder.layers:
            cross.append(KVCache.static(*layer.cross_attn.project_kv(memory)))  # (B, H, S, Dh)
            own.append(layer.self_attn.new_cache(batch, max_len, dtype=memory.dtype))
        return TransformerState(memory, encoded.keep, tuple(own), tuple(cross), 0, need_attention)

    def step(self, tokens: Tensor, state: TransformerState | CopyState) -> StepOutput:
        """Feed one token per row and return the next token's log-probabilities.

        Args:
            tokens: ``(B,)`` the previous tokens (BOS at the first step).
            state: from :meth:`init_state`, :meth:`step` or :meth:`select_state`; its
                self-attention caches are extended in place.

        Returns:
            :class:`StepOutput` with ``log_probs (B, V)``, the advanced state and ``attention
            (B, S)``: the last decoder layer's cross-attention averaged over heads (a copying
            model: log-probabilities over the extended vocabulary ``(B, Vx)`` and its copy
            attention).
        """
        if isinstance(state, CopyState):
            return self._copy_step(tokens, state)
        if tokens.shape != (state.memory.size(0),):
            raise ValueError(
                f"tokens must be (B={state.memory.size(0)},), got shape {tuple(tokens.shape)}"
            )
        x = self.embed_target(tokens[:, None], state.position)  # (B, 1, D)
        out = self.decoder(
            x,
            memory_keep=state.keep,
            self_caches=list(state.self_caches),
            cross_caches=list(state.cross_caches),
            need_cross_weights=state.need_attention,
        )
        log_probs = self.output_proj(out.hidden[:, 0]).log_softmax(dim=-1)  # (B, V)
        attention = None
        if state.need_attention:
            attention = out.cross_weights[-1][:, :, 0].mean(dim=1)  # (B, H, 1, S) -> (B, S)
        return StepOutput(log_probs, replace(state, position=state.position + 1), attention)

    def _copy_step(self, tokens: Tensor, state: CopyState) -> StepOutput:
        inner: TransformerState = state.decoder
        if tokens.shape != (inner.memory.size(0),) or self.copy_head is None:
            raise ValueError(
                f"tokens must be (B={inner.memory.size(0)},), got shape {tuple(tokens.shape)}"
            )
        x = self.embed_target(self._fed(tokens)[:, None], inner.position)  # (B, 1, D)
        out = self.decoder(
            x,
            memory_keep=inner.keep,
            self_caches=list(inner.self_caches),
            cross_caches=list(inner.cross_caches),
            need_cross_weights=inner.need_attention,  # the same kernels as a plain step
        )
        log_probs = self.output_proj(out.hidden).log_softmax(dim=-1)  # (B, 1, V)
        copy, source = self.copy_head(out.hidden, x, state.source)
        mixed = extended_log_probs(log_probs, copy, source.ext, source.extended_size)
        advanced = replace(inner, position=inner.position + 1)
        return StepOutput(mixed[:, 0], CopyState(advanced, source), copy.weights[:, 0])

    def select_state(
        self, state: TransformerState | CopyState, index: Tensor
    ) -> TransformerState | CopyState:
        """Rows ``index (B',)`` of every tensor in ``state`` (reorder, drop or repeat hypotheses).

        The caches are copied (:meth:`KVCache.select`), so the result may be stepped
        independently of ``state``.
        """
        if isinstance(state, CopyState):
            inner = self.select_state(state.decoder, index)
            return CopyState(inner, state.source.index_select(index))
        return TransformerState(
            state.memory.index_select(0, index),  # (B', S, D)
            state.keep.index_select(0, index),  # (B', 1, 1, S)
            tuple(cache.select(index) for cache in state.self_caches),
            tuple(cache.select(index) for cache in state.cross_caches),
            state.position,
            state.need_attention,
        )

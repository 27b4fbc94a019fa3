"""RNN encoder-decoder for translation, with or without attention: the field's central story.

    src (B, S) --embed--> bi-GRU/LSTM --> memory (B, S, 2He), final (B, L, 2He)
                                               |            |
    tgt_in (B, T) --embed--> decoder step t: s_{t-1} --> features --> W_o --> logits (B, T, V)

Three decoders, chosen by :attr:`Seq2SeqRNNConfig.attention`:

* ``"none"``: Cho et al. 2014, "Learning Phrase Representations using RNN Encoder-Decoder",
  section 2.2: one fixed context ``c`` (the encoder's final states) at every step; the bottleneck
  that attention removes.
* ``"bahdanau"``: Bahdanau, Cho, Bengio 2015, eq. (4)-(6), (A.1.2): additive attention from the
  previous state ``s_{t-1}``.
* ``"luong"``: Luong, Pham, Manning 2015, eq. (5)-(8), section 3.3: dot/general/concat attention
  from the current state, ``h~_t = tanh(W_c [c_t; h_t])``, input feeding.

The decoder state width is ``Ds = 2 * hidden_dim``, the width of the bidirectional encoder's
states, so Luong's ``dot`` score needs no projection and every variant has the same RNN sizes.

Scheduled sampling (Bengio et al. 2015, "Scheduled Sampling for Sequence Prediction with Recurrent
Neural Networks"): in training, each input token after the first is the gold ``y_{t-1}`` with
probability ``teacher_forcing`` and the model's own argmax prediction otherwise. In eval mode the
gold prefix is always used.

Copying (``copy=True``): See et al. 2017's pointer-generator, :mod:`qkv.layers.copy`. The decoder's
output ``s_t`` (the features before ``W_o``) and input embedding ``x_t`` feed a copy attention over
the encoder states and ``p_gen``; the model then reads ``src_ext`` (each source token's id in the
extended vocabulary), and ``step`` returns log-probabilities over it. ``coverage=True`` adds the
coverage vector to the copy attention's score and reports the coverage loss. Copying needs one
vocabulary for source and target (a copied word has the same id on both sides).

Which attention copies (``copy_attention``): ``"own"`` (the default) gives the copy head its own
additive attention, and coverage acts on it only; ``"decoder"`` is See et al.'s single attention:
the decoder's Bahdanau (or Luong) weights ``a^t`` make the context the generator reads and are
the copy distribution, coverage enters the Bahdanau score (``w_c``, zero-initialised, in the
decoder) and the coverage loss is computed on those weights. ``step`` then returns the decoder's
attention, the one that copies, as every copying model does.

The model implements the step protocol of :mod:`qkv.decoding.protocol`; ``step`` reproduces
``forward``'s teacher-forced log-probabilities in eval mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, nn

from qkv.attention.scores import Additive, Dot, General, Score
from qkv.config_values import (
    check_choice,
    check_copy,
    check_fractions,
    check_positive_ints,
    ranged,
)
from qkv.layers.copy import (
    CopyEncoding,
    CopyHead,
    CopyOutput,
    CopySource,
    CopyState,
    copy_encoding,
    coverage_losses,
    extended_log_probs,
    fed_ids,
)
from qkv.layers.recurrent import EncoderOutput, RecurrentDecoder, RecurrentEncoder, RecurrentState
from qkv.layers.recurrent_decoders import BahdanauDecoder, FixedContextDecoder, LuongDecoder
from qkv.models.outputs import Seq2SeqOutput, StepOutput
from qkv.models.sizes import check_parameters, recurrent_layers

__all__ = ["Seq2SeqRNN", "Seq2SeqRNNConfig"]

CELLS = ("gru", "lstm")
ATTENTIONS = ("none", "bahdanau", "luong")
LUONG_SCORES = ("dot", "general", "concat")
COPY_ATTENTIONS = ("own", "decoder")


@dataclass(frozen=True)
class Seq2SeqRNNConfig:
    """Configuration of :class:`Seq2SeqRNN`.

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes (larger than every special id).
        embed_dim: embedding width ``E`` (source and target).
        hidden_dim: encoder width ``He`` per direction; the decoder's is ``Ds = 2 * hidden_dim``.
        num_layers: layers ``L`` of the encoder and of the decoder.
        cell: ``"gru"`` or ``"lstm"``, for both.
        attention: ``"none"`` (Cho et al. 2014), ``"bahdanau"`` or ``"luong"``.
        luong_score: ``"dot"``, ``"general"`` or ``"concat"`` (used by ``attention="luong"``).
        dropout: on embeddings, between RNN layers and before the output layer.
        teacher_forcing: probability of feeding the gold token in training (scheduled sampling).
        copy: the pointer-generator's copy head (See et al. 2017); needs
            ``src_vocab_size == tgt_vocab_size`` (one shared vocabulary).
        coverage: coverage in the copy attention and its loss (needs ``copy``).
        copy_attention: which attention copies: ``"own"``, the copy head's own additive
            attention (the decoder's feeds the generator, untouched by coverage); ``"decoder"``,
            See et al.'s one attention: the decoder's ``a^t`` makes the generator's context and
            is the copy distribution, and coverage enters its score (``attention="bahdanau"``).
        pad_id, bos_id, eos_id, unk_id: special token ids (``<pad>`` 0, ``<s>`` 1, ``</s>`` 2,
            ``<unk>`` 3: what an extended id ``>= V`` is fed back to the decoder as).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 256
    hidden_dim: int = 256
    num_layers: int = 1
    cell: str = "gru"
    attention: str = "bahdanau"
    luong_score: str = "general"
    dropout: float = 0.2
    teacher_forcing: float = ranged(1.0, "[0, 1]")
    copy: bool = False
    coverage: bool = False
    copy_attention: str = "own"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    def __post_init__(self) -> None:
        specials = {
            "pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id,
            "unk_id": self.unk_id,
        }  # fmt: skip
        for name, value in specials.items():
            if not _is_int(value) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if len(set(specials.values())) != 4:
            raise ValueError(f"pad_id, bos_id, eos_id and unk_id must differ, got {specials}")
        for name in ("src_vocab_size", "tgt_vocab_size"):
            value = getattr(self, name)
            if not _is_int(value) or value <= max(specials.values()):
                raise ValueError(
                    f"{name} must be an int larger than every special id "
                    f"({max(specials.values())}), got {value!r}"
                )
        check_positive_ints(self, ("embed_dim", "hidden_dim", "num_layers"))
        check_choice("cell", self.cell, CELLS)
        check_choice("attention", self.attention, ATTENTIONS)
        check_choice("luong_score", self.luong_score, LUONG_SCORES)
        check_fractions(self, ("dropout",))
        if not _is_real(self.teacher_forcing) or not 0.0 <= self.teacher_forcing <= 1.0:
            raise ValueError(f"teacher_forcing must be in [0, 1], got {self.teacher_forcing!r}")
        check_copy(self.copy, self.coverage, self.src_vocab_size, self.tgt_vocab_size)
        check_choice("copy_attention", self.copy_attention, COPY_ATTENTIONS)
        self._check_copy_attention()
        if self.copy and self.teacher_forcing < 1.0:
            raise ValueError(
                "scheduled sampling (teacher_forcing < 1) is not available with copy=True; "
                "pass teacher_forcing=1.0"
            )
        e, h, ds, gates = self.embed_dim, self.hidden_dim, 2 * self.hidden_dim, 4
        encoder = 2 * recurrent_layers(self.num_layers, e, h, gates=gates)  # two directions
        decoder = recurrent_layers(self.num_layers, e + ds, ds, gates=gates)  # input feeding
        tables = (self.src_vocab_size + self.tgt_vocab_size) * e + self.tgt_vocab_size * ds
        check_parameters(
            self,
            tables + encoder + decoder,
            ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_dim", "num_layers"),
        )

    def _check_copy_attention(self) -> None:
        """``copy_attention="decoder"`` copies with the decoder's attention: it needs a copying
        model with one, and coverage needs the additive (Bahdanau) score, the one whose hidden
        layer ``w_c c_i`` joins (See et al. 2017, eq. 11). Luong's dot and general scores have no
        such layer, and its concat score attends from the state after the update; a coverage
        term there is not See et al.'s model, so it is refused rather than invented."""
        if self.copy_attention != "decoder":
            return
        if not self.copy:
            raise ValueError(
                "copy_attention='decoder' chooses the attention that copies; it needs copy=true "
                "(or leave copy_attention at 'own')"
            )
        if self.attention == "none":
            raise ValueError(
                "copy_attention='decoder' copies with the decoder's attention, but "
                "attention='none' has none: pass attention='bahdanau' (or 'luong')"
            )
        if self.coverage and self.attention != "bahdanau":
            raise ValueError(
                f"coverage with copy_attention='decoder' enters the decoder's additive score "
                f"(See et al. 2017, eq. 11); attention={self.attention!r} has no such score: "
                "pass attention='bahdanau', or copy_attention='own'"
            )

    @property
    def shared_copy(self) -> bool:
        """Whether the decoder's attention is the copy distribution (``copy_attention``)."""
        return self.copy and self.copy_attention == "decoder"

    @property
    def decoder_dim(self) -> int:
        """Decoder state width ``Ds``: the encoder states' width ``2 * hidden_dim``."""
        return 2 * self.hidden_dim


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def build_decoder(config: Seq2SeqRNNConfig) -> RecurrentDecoder:
    """The decoder named by ``config.attention``, with its score function injected."""
    sizes: dict[str, Any] = dict(
        cell=config.cell,
        embed_dim=config.embed_dim,
        memory_dim=2 * config.hidden_dim,
        hidden_dim=config.decoder_dim,
        num_layers=config.num_layers,
        dropout=config.dropout,
    )
    ds, dm = config.decoder_dim, 2 * config.hidden_dim
    if config.attention == "none":
        return FixedContextDecoder(**sizes)
    if config.attention == "bahdanau":
        coverage = config.shared_copy and config.coverage  # See et al.'s w_c c_i in this score
        return BahdanauDecoder(**sizes, score=Additive(ds, dm, ds), coverage=coverage)
    scores: dict[str, Score] = {
        "dot": Dot(),
        "general": General(ds, dm),
        "concat": Additive(ds, dm, ds, bias=False),  # Luong eq. (8): v^T tanh(W [h_t; h_s])
    }
    return LuongDecoder(**sizes, score=scores[config.luong_score])


class Seq2SeqRNN(nn.Module):
    """Bidirectional RNN encoder and an RNN decoder (fixed context, Bahdanau or Luong).

    Args:
        config: a :class:`Seq2SeqRNNConfig`.

    Shape:
        src ``(B, S)`` long right-padded with ``pad_id``; src_lengths ``(B,)`` in ``[1, S]``;
        tgt_in ``(B, T)`` long, ``[BOS] + y``; logits ``(B, T, V)``; cross attention
        ``(B, 1, T, S)``, zero on source padding.
    """

    def __init__(self, config: Seq2SeqRNNConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = RecurrentEncoder(
            config.src_vocab_size,
            config.embed_dim,
            config.hidden_dim,
            num_layers=config.num_layers,
            cell=config.cell,
            dropout=config.dropout,
            pad_id=config.pad_id,
        )
        self.tgt_embed = nn.Embedding(config.tgt_vocab_size, config.embed_dim, config.pad_id)
        self.decoder = build_decoder(config)
        self.dropout = nn.Dropout(config.dropout)
        self.generator = nn.Linear(self.decoder.output_dim, config.tgt_vocab_size)
        self.copy_head = (
            CopyHead(
                self.decoder.output_dim, 2 * config.hidden_dim, config.embed_dim,
                attention_dim=config.decoder_dim,
                coverage=config.coverage and not config.shared_copy,
                attention=not config.shared_copy,
            )
            if config.copy
            else None
        )  # fmt: skip

    def forward(
        self,
        src: Tensor,
        src_lengths: Tensor,
        tgt_in: Tensor,
        *,
        src_ext: Tensor | None = None,
        need_weights: bool = False,
    ) -> Seq2SeqOutput:
        """Teacher-forced (or, in training, scheduled-sampling) logits for every target position.

        Args:
            src_ext: ``(B, S)`` the source's extended ids, for a copying model (default: ``src``,
                no out-of-vocabulary slots); ``tgt_in`` may then hold extended ids, fed as
                ``unk_id``.

        Returns:
            :class:`Seq2SeqOutput` with logits ``(B, T, V)``, the copy head's output for a
            copying model and, when ``need_weights`` and the model attends,
            ``attentions["cross"] = [(B, 1, T, S)]``.
        """
        if tgt_in.dim() != 2 or tgt_in.size(0) != src.size(0) or tgt_in.size(1) == 0:
            raise ValueError(
                f"tgt_in must be (B, T) with T >= 1 and B = {src.size(0)} as in src, "
                f"got shape {tuple(tgt_in.shape)}"
            )
        encoded = self.encode(src, src_lengths, src_ext)
        state = self.init_state(encoded)
        copy = None
        if self.training and self.config.teacher_forcing < 1.0:
            assert isinstance(state, RecurrentState)  # the config allows no copying here
            logits, weights = self._scheduled_sampling(tgt_in, state, need_weights)
        else:
            emb = self.dropout(self.tgt_embed(self._fed(tgt_in)))  # (B, T, E)
            decoder_state = state.decoder if isinstance(state, CopyState) else state
            shared = self.config.shared_copy  # the copy head reads the decoder's weights
            features, weights = self.decoder(
                emb, decoder_state, need_weights=need_weights or shared
            )
            logits = self.generator(self.dropout(features))  # (B, T, V)
            if isinstance(state, CopyState):
                copy, _ = self._copy(features, emb, weights, state.source, loss=True)
        if not need_weights or weights is None:
            return Seq2SeqOutput(logits, copy=copy)
        return Seq2SeqOutput(logits, {"cross": [weights.unsqueeze(1)]}, copy=copy)  # (B,1,T,S)

    def _copy(
        self, features: Tensor, emb: Tensor, weights: Tensor | None, source: CopySource, *,
        loss: bool,
    ) -> tuple[CopyOutput, CopySource]:  # fmt: skip
        """The copy head's output for ``features (B, T, Ds)`` and ``emb (B, T, E)``: with its own
        attention, or (``copy_attention="decoder"``) with the decoder's ``weights (B, T, S)`` and
        their context, the coverage loss computed from them when ``loss`` and coverage."""
        assert self.copy_head is not None  # a copying model's state
        if not self.config.shared_copy:
            return self.copy_head(features, emb, source)
        assert weights is not None  # an attending decoder asked for its weights
        context = torch.bmm(weights, source.memory)  # (B, T, S) @ (B, S, 2He): h*_t
        covered = coverage_losses(weights) if loss and self.config.coverage else None  # (B, T)
        return self.copy_head.shared(weights, context, features, emb, covered), source

    def _fed(self, tokens: Tensor) -> Tensor:
        """``tokens`` with extended ids (``>= V``, copied words) fed as ``unk_id``."""
        if self.copy_head is None:
            return tokens
        return fed_ids(tokens, self.config.tgt_vocab_size, self.config.unk_id)

    def _scheduled_sampling(
        self, tgt_in: Tensor, state: RecurrentState, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Step by step; after the first step feed the argmax with prob. 1 - teacher_forcing."""
        logits: list[Tensor] = []
        weights: list[Tensor | None] = []
        tokens = tgt_in[:, 0]  # (B,) BOS
        for t in range(tgt_in.size(1)):
            if t > 0:
                gold = torch.rand(tokens.shape, device=tokens.device) < self.config.teacher_forcing
                tokens = torch.where(gold, tgt_in[:, t], logits[-1].argmax(dim=-1))  # (B,)
            emb = self.dropout(self.tgt_embed(tokens))  # (B, E)
            features, state, w = self.decoder.step(emb, state, need_weights=need_weights)
            logits.append(self.generator(self.dropout(features)))  # (B, V)
            weights.append(w)
        stacked = torch.stack(logits, dim=1)  # (B, T, V)
        if not need_weights or weights[0] is None:
            return stacked, None
        # An attending decoder returns weights at every step when asked for them.
        return stacked, torch.stack(cast("list[Tensor]", weights), dim=1)  # (B, T, S)

    # --- the step protocol (qkv.decoding.protocol) ---------------------------------------------

    def encode(
        self, src: Tensor, src_lengths: Tensor, src_ext: Tensor | None = None
    ) -> EncoderOutput | CopyEncoding:
        """Run the encoder once per batch. ``src (B, S)``, ``src_lengths (B,)`` in ``[1, S]``;
        ``src_ext (B, S)`` the extended ids of a copying model's source (default ``src``)."""
        if src.dim() != 2 or src_lengths.shape != (src.size(0),):
            raise ValueError(
                f"src must be (B, S) and src_lengths (B,), got shapes {tuple(src.shape)} and "
                f"{tuple(src_lengths.shape)}"
            )
        if src.size(0) == 0 or int(src_lengths.min()) < 1 or int(src_lengths.max()) > src.size(1):
            raise ValueError(
                f"src_lengths must lie in [1, S={src.size(1)}] for a non-empty batch, got "
                f"{src_lengths.tolist()}"
            )
        return copy_encoding(
            self.encoder(src, src_lengths), src, src_ext, copying=self.copy_head is not None,
            vocab_size=self.config.src_vocab_size, unk_id=self.config.unk_id,
        )  # fmt: skip

    def init_state(self, encoded: EncoderOutput | CopyEncoding) -> RecurrentState | CopyState:
        """Decoder state before the first target token (the bridged encoder final states; for
        a copying model also the copy head's prepared source)."""
        if not isinstance(encoded, CopyEncoding):
            return self.decoder.init_state(encoded)
        assert self.copy_head is not None  # only a copying model's encode makes a CopyEncoding
        inner: EncoderOutput = encoded.inner
        source = self.copy_head.prepare(
            inner.memory, inner.keep, encoded.ext, self.config.tgt_vocab_size
        )
        return CopyState(self.decoder.init_state(inner), source)

    def step(self, tokens: Tensor, state: RecurrentState | CopyState) -> StepOutput:
        """Feed ``tokens (B,)`` (``y_{t-1}``); return ``(B, V)`` log-probs (``(B, Vx)`` over the
        extended vocabulary for a copying model), the next state and the ``(B, S)`` attention of
        this step (the copy attention for a copying model; ``None`` for ``attention="none"``)."""
        emb = self.dropout(self.tgt_embed(self._fed(tokens)))  # (B, E)
        decoder_state = state.decoder if isinstance(state, CopyState) else state
        features, decoder_state, weights = self.decoder.step(emb, decoder_state, need_weights=True)
        log_probs = self.generator(self.dropout(features)).log_softmax(dim=-1)  # (B, V)
        if not isinstance(state, CopyState) or self.copy_head is None:
            return StepOutput(log_probs, decoder_state, weights)
        step_weights = None if weights is None else weights[:, None]  # (B, 1, S)
        out, source = self._copy(features[:, None], emb[:, None], step_weights, state.source,
                                 loss=False)  # fmt: skip
        mixed = extended_log_probs(log_probs[:, None], out, source.ext, source.extended_size)
        return StepOutput(mixed[:, 0], CopyState(decoder_state, source), out.weights[:, 0])

    def select_state(
        self, state: RecurrentState | CopyState, index: Tensor
    ) -> RecurrentState | CopyState:
        """Rows ``index (B',)`` of every tensor of ``state``, encoder memory included."""
        if isinstance(state, CopyState):
            return CopyState(state.decoder.index_select(index), state.source.index_select(index))
        return state.index_select(index)

"""Show, Attend and Tell (Xu et al. 2015): an LSTM writes a caption while attending over a grid
of image regions, with soft (deterministic) or hard (stochastic) attention.

    a = {a_1 .. a_R} = CNN(image) + positions            region features, (B, R, D)
    h_0 = tanh(f_init,h(mean_i a_i)), c_0 = tanh(f_init,c(mean_i a_i))      (section 3.1.2)
    e_ti = f_att(a_i, h_{t-1}) = v^T tanh(W h_{t-1} + U a_i)      alpha_t = softmax(e_t)  (4, 5)
    soft:  z_t = beta_t sum_i alpha_ti a_i,  beta_t = sigmoid(f_beta(h_{t-1}))   (eq. 13, 4.2.1)
    hard:  s_t ~ Multinoulli(alpha_t),  z_t = beta_t a_{s_t}                     (eq. 8, 9)
    h_t, c_t = LSTM([E y_{t-1}; z_t], h_{t-1}, c_{t-1})                        (eq. 1-3)
    p(y_t) = softmax(L_o(E y_{t-1} + L_h h_t + L_z z_t))          deep output layer, eq. (7)

The image is a strip of equal tiles, each encoded alone by a CNN into ``Gh x Gw`` regions
(:class:`~qkv.models.show_attend_tell.region_encoder.RegionEncoder`; a strip of ``n`` tiles has ``R
= Gh n Gw``
regions, row-major). Content alone cannot say which "3" of "3 3 5" comes first, so each region
gets a learned embedding of its place in the tile and a sinusoidal encoding of its tile's index.

Attention over the regions is :func:`~qkv.models.show_attend_tell.region_attention.attend_regions`:
soft through
qkv's core, hard through :class:`~qkv.attention.hard.HardAttention` (sampled in training, the
most likely region in eval; in training a hard model may take the expected context for some
strips, section 4.1). The REINFORCE baseline (eq. 12, an exponential moving average of the
reward) is a buffer of the model, so it is saved and restored with the weights.

The model implements the step protocol of :mod:`qkv.decoding.protocol` on the inputs ``(images,
keep)``: captions are written by :func:`qkv.decoding.greedy_search` or
:func:`qkv.decoding.beam_search`, as translations are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.hard import HardAttention
from qkv.attention.scores import Additive
from qkv.config_values import choice, ranged
from qkv.layers.positional import SinusoidalPositionalEncoding
from qkv.models.outputs import StepOutput
from qkv.models.presets import PRESETS as _PRESETS
from qkv.models.presets import Presets
from qkv.models.show_attend_tell.region_attention import AttentionStep, attend_regions
from qkv.models.show_attend_tell.region_encoder import RegionEncoder
from qkv.models.sizes import check_parameters, recurrent_layers

ATTENTIONS = ("soft", "hard")
PRESETS = _PRESETS["show_attend_tell"]  # mnist-soft, mnist-hard, tiny (qkv.models.presets)


@dataclass(frozen=True)
class ShowAttendTellConfig(Presets, family="show_attend_tell", sizes=("vocab_size",)):
    """Sizes of a :class:`ShowAttendTell` and how its hard attention is trained (the weights of
    the captioning loss are the run's ``train:`` section,
    :class:`qkv.tasks.captioning.task.CaptionTrainConfig`).

    Args:
        vocab_size: ``V`` caption words, specials included.
        image_channels: ``C`` of one tile.
        tile_height: ``H`` of one tile, a multiple of the stride ``2**len(conv_channels)``.
        tile_width: ``W`` of one tile, a multiple of the stride ``2**len(conv_channels)``.
        conv_channels: the width of each encoder block.
        region_layers: 3x3 convolutions (BatchNorm, ReLU) of width ``D`` on the region grid
            after the blocks; each widens what one region sees by 2 regions, so that a region
            can see its whole tile (hard attention reads one region only).
        feature_dim: ``D``, the width of a region feature.
        embed_dim: word embedding width (also the deep output layer's width).
        hidden_dim: the LSTM width.
        attention_dim: ``A``, the hidden width of the additive score.
        attention: ``"soft"`` or ``"hard"``.
        dropout: on region features and before the output layer.
        baseline_decay: the moving average of the REINFORCE baseline, ``b <- d b + (1 - d) r``
            (0.9 in the paper), ``r`` the mean reward of a batch.
        expected_fraction: the share of training strips for which the hard model uses the
            expected context (0.5 in the paper; 0: always sample).
    """

    vocab_size: int = ranged(13, ">= 4")
    image_channels: int = ranged(1, ">= 1")
    tile_height: int = 28  # no range stated: positive, a multiple of the stride
    tile_width: int = 28
    conv_channels: tuple[int, ...] = (32, 64)
    region_layers: int = ranged(0, ">= 0")
    feature_dim: int = ranged(128, ">= 1")
    embed_dim: int = ranged(64, ">= 1")
    hidden_dim: int = ranged(256, ">= 1")
    attention_dim: int = ranged(128, ">= 1")
    attention: str = choice("soft", ATTENTIONS)
    dropout: float = ranged(0.3, "[0, 1)")
    baseline_decay: float = ranged(0.9, "[0, 1]")
    expected_fraction: float = ranged(0.5, "[0, 1]")

    def __post_init__(self) -> None:
        object.__setattr__(self, "conv_channels", tuple(self.conv_channels))
        for name in (
            "vocab_size",
            "image_channels",
            "tile_height",
            "tile_width",
            "feature_dim",
            "embed_dim",
            "hidden_dim",
            "attention_dim",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.region_layers, int) or self.region_layers < 0:
            raise ValueError(f"region_layers must be an int >= 0, got {self.region_layers!r}")
        if self.vocab_size < 4:
            raise ValueError(
                f"vocab_size must be >= 4 (3 specials and a word), got {self.vocab_size}"
            )
        channels = self.conv_channels
        if not channels or any(not isinstance(c, int) or c < 1 for c in channels):
            raise ValueError(f"conv_channels must be positive ints, at least one, got {channels}")
        stride = self.stride
        if self.tile_height % stride or self.tile_width % stride:
            raise ValueError(
                f"tile {self.tile_height}x{self.tile_width} (height x width) is not a multiple of "
                f"the encoder's stride {stride} (2 ** {len(channels)} blocks)"
            )
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        for name in ("baseline_decay", "expected_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        widths = (self.image_channels, *channels)
        convs = sum(9 * (a + b) * b for a, b in zip(widths, channels, strict=False))
        d, e = self.feature_dim, self.embed_dim
        gh, gw = self.regions_per_tile
        regions = (gh * gw + self.region_layers * 9 * d) * d  # place table, region layers
        words = 2 * self.vocab_size * e + recurrent_layers(1, e + d, self.hidden_dim)
        check_parameters(
            self,
            convs + regions + words + self.attention_dim * (d + self.hidden_dim),
            ("vocab_size", "image_channels", "tile_height", "tile_width", "conv_channels",
             "feature_dim", "embed_dim", "hidden_dim", "attention_dim", "region_layers"),
        )  # fmt: skip

    @property
    def stride(self) -> int:
        """Pixels per region side: ``2**len(conv_channels)``."""
        return 2 ** len(self.conv_channels)

    @property
    def regions_per_tile(self) -> tuple[int, int]:
        """``(Gh, Gw)``: the region grid of one tile."""
        return self.tile_height // self.stride, self.tile_width // self.stride


@dataclass(frozen=True)
class CaptionOutput:
    """What :meth:`ShowAttendTell.forward` returns.

    Attributes:
        logits: ``(B, T, V)`` next-word scores.
        weights: ``(B, T, R)`` the attention distribution ``alpha`` of every step (zero at
            padded regions); for hard attention, the distribution the region was drawn from.
        choices: ``(B, T)`` hard attention's chosen region (``None`` for soft).
        log_probs: ``(B, T)`` ``log p(s_t | a)`` of the choices, differentiable (hard only;
            0 where the expected context was used).
        entropies: ``(B, T)`` entropy of ``alpha_t`` in nats, differentiable (hard only).
    """

    logits: Tensor
    weights: Tensor
    choices: Tensor | None = None
    log_probs: Tensor | None = None
    entropies: Tensor | None = None


@dataclass(frozen=True)
class EncodedImages:
    """The regions of a batch, computed once and read at every step: ``regions (B, R, D)``,
    the score's key projection ``prepared (B, R, A)``, ``keep (B, 1, R)`` (``True`` at the
    regions of real tiles; the decoding searches read it as :class:`qkv.decoding.Encoding`)."""

    regions: Tensor
    prepared: Tensor
    keep: Tensor


@dataclass(frozen=True)
class DecoderState:
    """The LSTM state ``h, c (B, hidden)`` and the encoded regions it attends over."""

    h: Tensor
    c: Tensor
    encoded: EncodedImages


@dataclass(frozen=True)
class DecoderStep:
    """One word of the decoder: ``logits (B, V)``, the state after it and its attention."""

    logits: Tensor
    state: DecoderState
    attention: AttentionStep


class ShowAttendTell(nn.Module):
    """CNN regions, an attending LSTM and a deep output layer (module docstring).

    Shape:
        ``images``: ``(B, C, H, n W)`` float, tiles of ``H x W`` side by side (values as in
        training, e.g. ``[0, 1]``); ``keep``: ``(B, Gh, n Gw)`` bool over the region grid,
        ``True`` at the regions of real tiles, constant over each tile (``None``: all real);
        ``captions_in``: ``(B, T)`` ``<bos>`` and the previous words; logits ``(B, T, V)``.
    """

    baseline: Tensor  # buffers, registered in __init__
    baseline_updates: Tensor

    def __init__(self, config: ShowAttendTellConfig) -> None:
        super().__init__()
        self.config = c = config
        gh, gw = c.regions_per_tile
        self.encoder = RegionEncoder(
            c.image_channels, c.tile_height, c.tile_width, c.conv_channels, c.region_layers,
            c.feature_dim,
        )  # fmt: skip
        self.place = nn.Parameter(torch.zeros(gh * gw, c.feature_dim))  # within a tile
        nn.init.normal_(self.place, std=0.02)
        self.tile_position = SinusoidalPositionalEncoding(c.feature_dim)
        self.feature_dropout = nn.Dropout(c.dropout)
        self.init_h = nn.Linear(c.feature_dim, c.hidden_dim)
        self.init_c = nn.Linear(c.feature_dim, c.hidden_dim)
        score = Additive(c.hidden_dim, c.feature_dim, c.attention_dim)  # f_att
        # One owner per parameter: the hard attention module holds the score when there is one.
        self.score = score if c.attention == "soft" else None
        self.hard = HardAttention(score) if c.attention == "hard" else None
        self.gate = nn.Linear(c.hidden_dim, 1)  # beta
        self.embed = nn.Embedding(c.vocab_size, c.embed_dim)
        self.lstm = nn.LSTMCell(c.embed_dim + c.feature_dim, c.hidden_dim)
        self.out_h = nn.Linear(c.hidden_dim, c.embed_dim)  # L_h
        self.out_z = nn.Linear(c.feature_dim, c.embed_dim)  # L_z
        self.output = nn.Linear(c.embed_dim, c.vocab_size)  # L_o
        self.output_dropout = nn.Dropout(c.dropout)
        # REINFORCE baseline b (eq. 12) and how many updates it has had (0: not yet set).
        self.register_buffer("baseline", torch.zeros(()))
        self.register_buffer("baseline_updates", torch.zeros((), dtype=torch.long))

    # ------------------------------------------------------------------ encoder

    def encode(self, images: Tensor, keep: Tensor | None = None) -> EncodedImages:
        """Region features of real tiles, each tile encoded alone (padded tiles are skipped)."""
        tile_keep = self.encoder.tile_keep(images, keep)  # (B, n)
        grid = self.encoder.encode_tiles(images, tile_keep)  # (B, n, Gh Gw, D)
        tiles = torch.arange(tile_keep.size(1), device=images.device)
        position = self.tile_position.encoding(tiles)  # (n, D)
        grid = grid + self.place + position[:, None, :].to(grid.dtype)  # (B, n, Gh Gw, D)
        regions = self.feature_dropout(self.encoder.regions(grid))  # (B, R, D)
        prepared = self.attention_score.prepare(regions)  # U a, (B, R, A)
        return EncodedImages(regions, prepared, self.encoder.region_keep(tile_keep))

    def init_state(self, encoded: EncodedImages) -> DecoderState:
        """``h_0, c_0`` from the mean of the real regions (section 3.1.2)."""
        keep = encoded.keep.transpose(1, 2).to(encoded.regions.dtype)  # (B, R, 1)
        mean = (encoded.regions * keep).sum(1) / keep.sum(1).clamp_min(1)  # (B, D)
        return DecoderState(self.init_h(mean).tanh(), self.init_c(mean).tanh(), encoded)

    # ------------------------------------------------------------------ one step

    @property
    def attention_score(self) -> Additive:
        """The additive score ``f_att`` (owned by the hard attention module when there is one)."""
        score = self.score if self.hard is None else self.hard.score
        if not isinstance(score, Additive):  # HardAttention holds any Score: this one's is f_att
            raise TypeError(f"f_att must be an Additive score, got {type(score).__name__}")
        return score

    def _step(
        self, tokens: Tensor, state: DecoderState, expected: Tensor | None = None
    ) -> DecoderStep:
        """Attend, then write one word (eq. 1-3, 7) after ``tokens (B,)``."""
        enc = state.encoded
        attention = attend_regions(
            state.h,
            enc.regions,
            enc.prepared,
            enc.keep,
            score=self.attention_score,
            gate=self.gate,
            hard=self.hard,
            expected=expected,
        )
        z = attention.context
        e = self.embed(tokens)  # (B, E)
        h, c = self.lstm(torch.cat([e, z], dim=-1), (state.h, state.c))  # (B, hidden)
        deep = e + self.out_h(self.output_dropout(h)) + self.out_z(z)  # (B, E), eq. (7)
        logits = self.output(self.output_dropout(deep))  # (B, V)
        return DecoderStep(logits, DecoderState(h, c, state.encoded), attention)

    def step(self, tokens: Tensor, state: DecoderState) -> StepOutput:
        """The step protocol of :mod:`qkv.decoding`: feed ``tokens (B,)``, get log-probabilities
        ``(B, V)`` and the attention ``alpha (B, R)`` used for them. Hard attention reads the
        most likely region in eval mode (call ``eval()`` before decoding) and samples one in
        training mode."""
        out = self._step(tokens, state)
        return StepOutput(out.logits.float().log_softmax(-1), out.state, out.attention.alpha)

    def select_state(self, state: DecoderState, index: Tensor) -> DecoderState:
        """Rows ``index (B',)`` of the LSTM state and of the encoded regions."""
        enc = state.encoded
        encoded = EncodedImages(enc.regions[index], enc.prepared[index], enc.keep[index])
        return DecoderState(state.h[index], state.c[index], encoded)

    # ------------------------------------------------------------------ whole captions

    def forward(
        self,
        images: Tensor,
        keep: Tensor | None,
        captions_in: Tensor,
        *,
        expected: Tensor | None = None,
    ) -> CaptionOutput:
        """Teacher-forced logits for ``captions_in (B, T)``; ``expected (B,)`` bool: hard
        attention uses the expected context for these strips (training only)."""
        if captions_in.dim() != 2 or captions_in.size(0) != images.size(0):
            raise ValueError(
                f"captions_in must be (B, T) = ({images.size(0)}, T), got "
                f"{tuple(captions_in.shape)}"
            )
        if captions_in.numel() and (
            int(captions_in.min()) < 0 or int(captions_in.max()) >= self.config.vocab_size
        ):
            raise ValueError(
                f"caption ids must lie in [0, {self.config.vocab_size}), got "
                f"[{int(captions_in.min())}, {int(captions_in.max())}]"
            )
        if expected is not None and (self.hard is None or not self.training):
            expected = None  # soft attention, or evaluation: nothing is sampled
        state = self.init_state(self.encode(images, keep))
        logits, steps = [], []
        for t in range(captions_in.size(1)):
            out = self._step(captions_in[:, t], state, expected)
            state = out.state
            logits.append(out.logits)
            steps.append(out.attention)

        def stack(name: str) -> Tensor | None:  # (B, T, ...) over the steps, or None (soft)
            values = [getattr(step, name) for step in steps]
            return None if values[0] is None else torch.stack(values, dim=1)

        return CaptionOutput(
            torch.stack(logits, dim=1),  # (B, T, V)
            torch.stack([step.alpha for step in steps], dim=1),  # (B, T, R)
            stack("choice"),
            stack("log_prob"),
            stack("entropy"),
        )

    # ------------------------------------------------------------------ REINFORCE baseline

    @torch.no_grad()
    def update_baseline(self, rewards: Tensor) -> Tensor:
        """The baseline to use for ``rewards (N,)`` (eq. 12), then ``b <- d b + (1 - d) mean``.

        The first update sets ``b`` to the mean reward, so early advantages are centred."""
        if rewards.numel() == 0:
            return self.baseline.clone()
        mean = rewards.detach().float().mean()
        if int(self.baseline_updates) == 0:
            self.baseline.copy_(mean)
        used = self.baseline.clone()
        decay = self.config.baseline_decay
        self.baseline.mul_(decay).add_((1 - decay) * mean)
        self.baseline_updates.add_(1)
        return used

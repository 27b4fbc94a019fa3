"""The Transformer's config (Vaswani et al. 2017, section 3 and table 3): sizes, the norm's
place, positions, sharing and tying, and the pointer-generator's copy head; checked in
``__post_init__``."""

from __future__ import annotations

from dataclasses import dataclass

from qkv.config_values import (
    check_choice,
    check_copy,
    check_fractions,
    check_positive_ints,
)
from qkv.layers.feedforward import ACTIVATIONS
from qkv.models.sizes import check_parameters, transformer_layers


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of a :class:`.Transformer`; the defaults are the paper's base model (Table 3).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes ``V`` (special ids included).
        d_model: width ``D``; num_heads: ``H`` (a divisor of ``D``).
        num_encoder_layers, num_decoder_layers: ``N``.
        d_ff: hidden width of the feed-forward networks.
        dropout: ``P_drop`` (section 5.4) on embeddings + positions, sub-layer outputs, attention
            weights and FFN activations.
        activation: ``"relu"`` (the paper) or ``"gelu"``.
        norm_first: pre-norm instead of the paper's post-norm.
        share_embeddings: one embedding matrix for source and target (needs equal vocabularies;
            the paper shares it over a joint BPE vocabulary).
        tie_output: the pre-softmax projection reuses the target embedding matrix (section 3.4).
        pad_id: the padding id; its embedding row starts at zero and gets no gradient from lookups.
        embed_init: how the embedding matrices start: ``"xavier"`` (Xavier-uniform, as every
            other matrix and as ``nn.Transformer``) or ``"normal"``: ``N(0, 1/D)``, so that the
            embeddings times ``sqrt(D)`` have unit variance, the size of the sinusoidal
            positions they are added to (fairseq and Tensor2Tensor; with a vocabulary of
            thousands, Xavier starts the scaled embeddings about three times smaller than the
            positions, and with a tied output layer the first logits as small).
        copy: the pointer-generator's copy head (See et al. 2017); needs equal vocabularies.
        coverage: coverage in the copy attention and its loss (needs ``copy``).
        unk_id: the unknown word, what an extended id ``>= V`` is fed back to the decoder as.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    share_embeddings: bool = False
    tie_output: bool = True
    pad_id: int = 0
    embed_init: str = "xavier"
    copy: bool = False
    coverage: bool = False
    unk_id: int = 3

    def __post_init__(self) -> None:
        check_positive_ints(
            self,
            ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "num_encoder_layers",
             "num_decoder_layers", "d_ff"),
        )  # fmt: skip
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        check_fractions(self, ("dropout",))
        check_choice("activation", self.activation, sorted(ACTIVATIONS))
        check_choice("embed_init", self.embed_init, ["normal", "xavier"])
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs equal vocabularies, got "
                f"src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )
        smallest = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "unk_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < smallest:
                raise ValueError(f"{name}={value!r} must be an int in [0, {smallest})")
        if self.unk_id == self.pad_id:
            raise ValueError(f"unk_id and pad_id must differ, got {self.unk_id} for both")
        check_copy(self.copy, self.coverage, self.src_vocab_size, self.tgt_vocab_size)
        d, tgt = self.d_model, self.tgt_vocab_size
        embeddings = self.src_vocab_size * d + (0 if self.share_embeddings else tgt * d)
        layers = transformer_layers(self.num_encoder_layers, d, self.d_ff) + transformer_layers(
            self.num_decoder_layers, d, self.d_ff, cross=True
        )
        check_parameters(
            self,
            embeddings + (0 if self.tie_output else tgt * d) + layers,
            ("src_vocab_size", "tgt_vocab_size", "d_model", "d_ff", "num_encoder_layers",
             "num_decoder_layers"),
        )  # fmt: skip

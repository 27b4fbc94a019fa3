"""The Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words"), laid out so
Hugging Face's ``ViTModel`` / ``ViTForImageClassification`` weights import one to one
(:mod:`qkv.interop.vit`).

An image ``(C, H, W)`` is cut into ``P = (H / p) (W / p)`` patches of ``p x p`` pixels; each is
flattened and projected to width ``D`` (a ``Conv2d`` with kernel = stride = ``p`` is exactly that
linear map, applied to every patch):

    z_0 = [x_class; x_p^1 E; ...; x_p^P E] + E_pos                    (eq. 1)
    z'_l = MSA(LN(z_{l-1})) + z_{l-1}                                  (eq. 2)
    z_l = MLP(LN(z'_l)) + z'_l                                         (eq. 3)
    y = LN(z_L^0)                                                      (eq. 4)
    logits = y W_head + b_head                       (the classification head on [CLS])

The blocks are :class:`qkv.layers.TransformerEncoder` with ``norm_first=True`` (its final
LayerNorm is eq. 4's) and the exact GELU, running on qkv's attention core.

Other resolutions (section 3.2, "Fine-tuning and higher resolution"): the learned position
embeddings of the configured ``g x g`` patch grid are resized by bicubic interpolation over the
2-D grid to the input's ``(H / p) x (W / p)`` grid (``align_corners=False``, the same resize as
Hugging Face's ``interpolate_pos_encoding``); the [CLS] position is kept as is. At the
configured size the table is used untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.config_values import check_fractions, check_positive_ints, choice, ranged
from qkv.layers.transformer import TransformerEncoder
from qkv.models.outputs import ViTOutput
from qkv.models.presets import PRESETS as TABLE
from qkv.models.presets import Presets
from qkv.models.sizes import check_parameters, transformer_layers

# Named sizes (all of them live in qkv.models.presets): ViT-B/16, an MNIST-sized model, a test
# size.
PRESETS = TABLE["vit"]


# The MLP activations of a ViT: the exact erf GELU (the paper's) or its tanh approximation.
VIT_ACTIVATIONS = ("gelu", "gelu_tanh")


@dataclass(frozen=True)
class ViTConfig(Presets, family="vit"):
    """Sizes of a :class:`ViT`; the defaults are ViT-B/16's at 224 x 224 (86M parameters).

    Args:
        image_size: the configured side ``H = W`` in pixels (the position table is for it).
        patch_size: ``p``, a divisor of ``image_size``; num_channels: ``C``.
        hidden_size: ``D``; num_layers: ``L``; num_heads: ``H`` (a divisor of ``D``);
            intermediate_size: the MLP width.
        num_labels: ``K`` classes of the head on [CLS]; ``0``: no head (``logits`` is ``None``).
        dropout: after the position embeddings, in the MLP and on each sub-layer's output
            (section 4.1: "after every dense layer except for the qkv-projections and directly
            after adding positional- to patch embeddings").
        attention_dropout: on the attention weights.
        layer_norm_eps: the LayerNorm epsilon (1e-6 in the paper's code; Hugging Face 1e-12).
        activation: the MLP's ``"gelu"`` (exact erf, the paper's) or ``"gelu_tanh"``.
    """

    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    num_labels: int = ranged(1000, ">= 0")
    dropout: float = 0.0
    attention_dropout: float = 0.0
    layer_norm_eps: float = ranged(1e-6, "> 0")
    activation: str = choice("gelu", VIT_ACTIVATIONS)

    def __post_init__(self) -> None:
        check_positive_ints(
            self,
            ("image_size", "patch_size", "num_channels", "hidden_size", "num_layers", "num_heads",
             "intermediate_size"),
        )  # fmt: skip
        if self.image_size % self.patch_size != 0:
            raise ValueError(
                f"patch_size={self.patch_size} does not divide image_size={self.image_size}"
            )
        if self.hidden_size % self.num_heads != 0:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}"
            )
        labels = self.num_labels
        if not isinstance(labels, int) or isinstance(labels, bool) or labels < 0:
            raise ValueError(f"num_labels must be an int >= 0 (0: no head), got {labels!r}")
        check_fractions(self, ("dropout", "attention_dropout"))
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if self.activation not in VIT_ACTIVATIONS:
            raise ValueError(f"activation must be 'gelu' or 'gelu_tanh', got {self.activation!r}")
        d = self.hidden_size
        # The patch projection, the position table (a row per patch and [CLS]), the head.
        rows = self.num_channels * self.patch_size**2 + self.num_patches + 1 + self.num_labels
        check_parameters(
            self,
            rows * d + transformer_layers(self.num_layers, d, self.intermediate_size),
            ("image_size", "patch_size", "num_channels", "hidden_size", "intermediate_size",
             "num_layers", "num_labels"),
        )  # fmt: skip

    @property
    def grid_size(self) -> int:
        """Patches per side at the configured size: ``image_size / patch_size``."""
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        """``P`` at the configured size."""
        return self.grid_size**2


class ViT(nn.Module):
    """Patch embedding, [CLS] token, learned positions, pre-norm encoder and a linear head.

    Shape:
        ``images``: ``(B, C, H, W)`` with ``H`` and ``W`` multiples of ``patch_size`` (any size:
        positions are interpolated when it is not ``image_size``). Output ``logits (B, K)`` (or
        ``None`` without a head), ``hidden (B, 1 + P, D)`` after the final LayerNorm with
        ``P = (H / p)(W / p)``, [CLS] first, patches in row-major order, and, with
        ``need_weights``, one ``(B, H, 1 + P, 1 + P)`` weight per layer.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = c = config
        # One linear map E (D x C p^2) applied to each non-overlapping p x p patch.
        self.patch_embed = nn.Conv2d(
            c.num_channels, c.hidden_size, kernel_size=c.patch_size, stride=c.patch_size
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.hidden_size))  # x_class
        self.position_embeddings = nn.Parameter(torch.zeros(1, 1 + c.num_patches, c.hidden_size))
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = TransformerEncoder(
            c.num_layers,
            c.hidden_size,
            c.num_heads,
            c.intermediate_size,
            dropout=c.dropout,
            activation=c.activation,
            norm_first=True,
            layer_norm_eps=c.layer_norm_eps,
        )
        for layer in self.encoder.layers:
            # The shared layer drops attention weights at the residual rate; ViT has its own.
            layer.self_attn.dropout = c.attention_dropout
        self.head = nn.Linear(c.hidden_size, c.num_labels) if c.num_labels > 0 else None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Truncated N(0, 0.02) position embeddings and [CLS] token (as Hugging Face and timm);
        the linear maps keep PyTorch's defaults."""
        nn.init.trunc_normal_(self.position_embeddings, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def position_table(self, grid_h: int, grid_w: int) -> Tensor:
        """``E_pos`` for a ``grid_h x grid_w`` patch grid: ``(1, 1 + grid_h grid_w, D)``.

        The configured table itself when the grid is the configured one; otherwise its patch
        rows, seen as a ``g x g`` image of ``D`` channels, resized bicubically (section 3.2),
        with the [CLS] row kept in front."""
        g = self.config.grid_size
        if (grid_h, grid_w) == (g, g):
            return self.position_embeddings
        cls_pos = self.position_embeddings[:, :1]  # (1, 1, D)
        d = cls_pos.size(-1)
        grid = self.position_embeddings[:, 1:].reshape(1, g, g, d).permute(0, 3, 1, 2)  # (1,D,g,g)
        grid = F.interpolate(grid, size=(grid_h, grid_w), mode="bicubic", align_corners=False)
        patches = grid.permute(0, 2, 3, 1).reshape(1, grid_h * grid_w, d)  # (1, P, D)
        return torch.cat([cls_pos, patches], dim=1)  # (1, 1 + P, D)

    def embed(self, images: Tensor) -> Tensor:
        """Eq. (1), then dropout: ``(B, C, H, W) -> (B, 1 + P, D)``."""
        patches = self.patch_embed(images)  # (B, D, H/p, W/p)
        grid_h, grid_w = patches.shape[-2:]
        patches = patches.flatten(2).transpose(1, 2)  # (B, P, D), row-major over the grid
        cls = self.cls_token.expand(patches.size(0), -1, -1)  # (B, 1, D)
        x = torch.cat([cls, patches], dim=1) + self.position_table(grid_h, grid_w)  # (B, 1+P, D)
        return self.dropout(x)

    def forward(self, images: Tensor, *, need_weights: bool = False) -> ViTOutput:
        """Classify ``images (B, C, H, W)``; ``need_weights`` adds every layer's attention weights
        without changing ``logits`` or ``hidden``."""
        self.check_inputs(images)
        out = self.encoder(self.embed(images), need_weights=need_weights)
        hidden = out.hidden  # (B, 1 + P, D), after the final LayerNorm (eq. 4)
        logits = None if self.head is None else self.head(hidden[:, 0])  # (B, K)
        return ViTOutput(logits, hidden, out.self_weights if need_weights else None)

    def check_inputs(self, images: Tensor) -> None:
        """Raise ``ValueError`` naming the bad shape or dtype."""
        c = self.config
        if images.dim() != 4 or images.size(0) == 0:
            raise ValueError(
                f"images must be (B, C, H, W) with B >= 1, got shape {tuple(images.shape)}"
            )
        if not images.is_floating_point():
            raise ValueError(f"images must be floating point, got dtype {images.dtype}")
        _, channels, height, width = images.shape
        if channels != c.num_channels:
            raise ValueError(
                f"images have {channels} channel(s), this model takes "
                f"num_channels={c.num_channels} (shape {tuple(images.shape)})"
            )
        if height == 0 or width == 0 or height % c.patch_size or width % c.patch_size:
            raise ValueError(
                f"image size {height}x{width} is not a positive multiple of "
                f"patch_size={c.patch_size} in both sides"
            )

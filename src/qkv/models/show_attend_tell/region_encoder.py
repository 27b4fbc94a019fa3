"""The region encoder of Show, Attend and Tell (Xu et al. 2015, section 3.1.1): a CNN turns each
tile of an image strip into a grid of region features, the annotation vectors ``a_i``.

The image is a strip of equal tiles (:mod:`qkv.data.images.strips`). The encoder runs on each tile
alone: blocks of two 3x3 convolutions (BatchNorm, ReLU) and a 2x2 max-pool, optional 3x3
convolutions on the region grid (so that one region can see its whole tile), then a 1x1
projection to ``D``. With ``k`` blocks the stride is ``2**k``, and a tile of ``H x W`` pixels
gives ``Gh x Gw = H / 2**k x W / 2**k`` regions (28 pixels, two blocks: 7 x 7). A strip of
``n`` tiles gives the grid ``Gh x n Gw``, flattened row-major to ``R = Gh n Gw`` regions; region
column ``j`` lies inside tile ``j // Gw``. Encoding tiles alone means a padded tile (``keep``
false) is never computed and cannot change a real region, so padding a strip changes nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qkv.attention.masks import check_keep


class RegionEncoder(nn.Sequential):
    """The CNN of one tile, and the layout of a strip's tiles as regions.

    Args:
        image_channels: ``C`` of one tile.
        tile_height: ``H`` of one tile (a multiple of ``2**len(conv_channels)``).
        tile_width: ``W`` of one tile (a multiple of ``2**len(conv_channels)``).
        conv_channels: the width of each block.
        region_layers: 3x3 convolutions of width ``D`` on the region grid after the blocks.
        feature_dim: ``D``.

    Shape:
        called on tiles ``(N, C, H, W)``, it returns their features ``(N, D, Gh, Gw)``.
    """

    def __init__(
        self,
        image_channels: int,
        tile_height: int,
        tile_width: int,
        conv_channels: tuple[int, ...],
        region_layers: int,
        feature_dim: int,
    ) -> None:
        layers: list[nn.Module] = []
        width = image_channels
        for channels in conv_channels:
            for conv_in in (width, channels):
                layers += [
                    nn.Conv2d(conv_in, channels, 3, padding=1, bias=False),
                    nn.BatchNorm2d(channels),
                    nn.ReLU(inplace=True),
                ]
            layers.append(nn.MaxPool2d(2))
            width = channels
        for _ in range(region_layers):
            layers += [
                nn.Conv2d(width, feature_dim, 3, padding=1, bias=False),
                nn.BatchNorm2d(feature_dim),
                nn.ReLU(inplace=True),
            ]
            width = feature_dim
        layers += [nn.Conv2d(width, feature_dim, 1), nn.ReLU(inplace=True)]
        super().__init__(*layers)
        self.tile_shape = (image_channels, tile_height, tile_width)
        stride = 2 ** len(conv_channels)
        self.grid = (tile_height // stride, tile_width // stride)  # (Gh, Gw)
        self.feature_dim = feature_dim

    def tile_keep(self, images: Tensor, keep: Tensor | None) -> Tensor:
        """Validate a batch of strips; return which of its ``n`` tiles are real, ``(B, n)``.

        ``images (B, C, H, n W)`` float; ``keep (B, Gh, n Gw)`` bool over the region grid,
        constant over each tile (``None``: every tile is real)."""
        channels, height, tile_width = self.tile_shape
        if images.dim() != 4 or not images.dtype.is_floating_point:
            raise ValueError(
                f"images must be a float tensor (B, C, H, W), got {images.dtype} "
                f"of shape {tuple(images.shape)}"
            )
        b, c, h, width = images.shape
        if b == 0 or c != channels or h != height or width == 0:
            raise ValueError(
                f"images of shape {tuple(images.shape)} do not fit this model: expected "
                f"(B >= 1, {channels}, {height}, n * {tile_width})"
            )
        if width % tile_width:
            raise ValueError(
                f"image width {width} is not a multiple of the tile width {tile_width}"
            )
        n = width // tile_width
        gh, gw = self.grid
        if keep is None:
            return torch.ones(b, n, dtype=torch.bool, device=images.device)
        check_keep(keep, "keep")
        if keep.shape != (b, gh, n * gw):
            raise ValueError(
                f"keep must be a bool tensor (B, Gh, n Gw) = {(b, gh, n * gw)}, got {keep.dtype} "
                f"of shape {tuple(keep.shape)}"
            )
        tiles = keep.reshape(b, gh, n, gw)
        tile_keep = tiles[:, 0, :, 0]  # (B, n)
        if not bool((tiles == tile_keep[:, None, :, None]).all()):
            raise ValueError("keep must be constant over the regions of each tile")
        return tile_keep

    def encode_tiles(self, images: Tensor, tile_keep: Tensor) -> Tensor:
        """The features of each real tile, computed alone: ``(B, n, Gh Gw, D)``, zero at the
        padded tiles (never computed)."""
        channels, height, tile_width = self.tile_shape
        b, n = tile_keep.shape
        gh, gw = self.grid
        tiles = images.reshape(b, channels, height, n, tile_width)
        tiles = tiles.permute(0, 3, 1, 2, 4)  # (B, n, C, H, W)
        real = tile_keep.flatten()  # (B n,)
        features = self(tiles.flatten(0, 1)[real])  # (N_real, D, Gh, Gw)
        grid = features.new_zeros(b * n, self.feature_dim, gh, gw)
        grid[real] = features
        return grid.view(b, n, self.feature_dim, gh * gw).transpose(2, 3)  # (B, n, Gh Gw, D)

    def regions(self, grid: Tensor) -> Tensor:
        """Per-tile features ``(B, n, Gh Gw, D)`` as the strip's regions, row-major over its
        grid ``Gh x n Gw``: ``(B, R, D)``."""
        b, n = grid.shape[:2]
        gh, gw = self.grid
        regions = grid.view(b, n, gh, gw, self.feature_dim).transpose(1, 2)  # (B, Gh, n, Gw, D)
        return regions.reshape(b, gh * n * gw, self.feature_dim)  # (B, R, D)

    def region_keep(self, tile_keep: Tensor) -> Tensor:
        """``tile_keep (B, n)`` over the regions: ``(B, 1, R)``, in the order of :meth:`regions`."""
        b, n = tile_keep.shape
        gh, gw = self.grid
        return tile_keep[:, None, :, None].expand(b, gh, n, gw).reshape(b, 1, -1)

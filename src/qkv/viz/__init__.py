"""Seeing attention: heatmaps and per-head grids (matplotlib, imported only when drawing)."""

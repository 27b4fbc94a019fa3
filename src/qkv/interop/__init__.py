"""Weights from other implementations into qkv's models (no code from them at run time)."""

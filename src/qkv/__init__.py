"""qkv: attention mechanisms and the models built on them."""

__version__ = "0.1.0"

"""The Transformer of Vaswani et al. (2017) for translation: the module path
(:mod:`~qkv.models.transformer.model`, training and attention views) and the lean decode step
for serving (:mod:`~qkv.models.transformer.decode`)."""

from qkv.models.transformer.model import Transformer, TransformerConfig

__all__ = ["Transformer", "TransformerConfig"]

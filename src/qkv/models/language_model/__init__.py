"""The GPT-style decoder-only language model: the module path
(:mod:`~qkv.models.language_model.model`) and the lean decode step for generation
(:mod:`~qkv.models.language_model.decode`)."""

from qkv.models.language_model.model import TransformerLM, TransformerLMConfig

__all__ = ["TransformerLM", "TransformerLMConfig"]

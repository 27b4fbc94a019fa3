"""CTranslate2 as a serving backend (the ``ctranslate2`` extra): convert qkv's Transformers into
CTranslate2 specs, export a trained model directory, run it with qkv's tokenizers, input checks
and decoding rules, and show a translation's attention in the explorer."""

from __future__ import annotations


def compute_type(precision: str | None) -> str:
    """CTranslate2's compute type for a qkv ``precision`` (``"float32"``, ``"bfloat16"``,
    ``"int8"``; ``None``: ``"default"``, the type the export stored)."""
    return "default" if precision is None else precision

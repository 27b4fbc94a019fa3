"""Which decode step the searches run for a translation model: its lean step where it has one
(:mod:`qkv.models.transformer.decode`, :mod:`qkv.models.rnn_decode`), else the model itself
(the module path). One place decides, for every caller."""

from __future__ import annotations

from typing import Any

from torch import nn

from qkv.layers.packed_linear import Precision
from qkv.models import rnn_decode
from qkv.models.seq2seq_rnn import Seq2SeqRNN
from qkv.models.transformer import decode as transformer_decode
from qkv.models.transformer.model import Transformer

__all__ = ["has_lean_step", "lean_step_model"]


def has_lean_step(model: nn.Module) -> bool:
    """Whether ``model`` decodes through a lean decode step: a Transformer or an RNN without a
    copy head."""
    return transformer_decode.has_lean_step(model) or rnn_decode.has_lean_step(model)


def lean_step_model(
    model: nn.Module, precision: Precision, *, max_len: int, need_attention: bool
) -> Any:
    """What the searches step for ``model``: its lean decode step where it has one
    (:func:`has_lean_step`), else ``model`` itself (the module path). ``max_len``: the most
    tokens any output may have; ``need_attention``: whether steps report attention."""
    if not has_lean_step(model):
        return model
    if isinstance(model, Transformer):
        return transformer_decode.LeanTranslationDecoder(
            model,
            precision=precision,
            max_len=max_len,
            need_attention=need_attention,
            weights=transformer_decode.decode_weights(model, precision),
        )
    assert isinstance(model, Seq2SeqRNN) and precision == "float32"  # checked by __init__
    return rnn_decode.LeanRNNDecoder(
        model, need_attention=need_attention, weights=rnn_decode.decode_weights(model)
    )

"""Models built on the attention core, one file per family, each with its config."""

from qkv.models.language_model import TransformerLM, TransformerLMConfig
from qkv.models.outputs import LMOutput, Seq2SeqOutput, StepOutput
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.models.transformer import Transformer, TransformerConfig

__all__ = [
    "LMOutput",
    "Seq2SeqOutput",
    "Seq2SeqRNN",
    "Seq2SeqRNNConfig",
    "StepOutput",
    "Transformer",
    "TransformerConfig",
    "TransformerLM",
    "TransformerLMConfig",
]

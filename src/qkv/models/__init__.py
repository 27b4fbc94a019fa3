"""Models built on the attention core, one file per family, each with its config."""

from qkv.models.bert.model import BertConfig, BertEncoder
from qkv.models.classifier import EncoderClassifier, EncoderClassifierConfig
from qkv.models.language_model.model import TransformerLM, TransformerLMConfig
from qkv.models.outputs import (
    BertOutput,
    ClassifierOutput,
    LMOutput,
    Seq2SeqOutput,
    StepOutput,
    TaggerOutput,
)
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.models.tagger import SequenceTagger, SequenceTaggerConfig
from qkv.models.transformer.model import Transformer, TransformerConfig

__all__ = [
    "BertConfig",
    "BertEncoder",
    "BertOutput",
    "ClassifierOutput",
    "EncoderClassifier",
    "EncoderClassifierConfig",
    "LMOutput",
    "Seq2SeqOutput",
    "Seq2SeqRNN",
    "Seq2SeqRNNConfig",
    "SequenceTagger",
    "SequenceTaggerConfig",
    "StepOutput",
    "TaggerOutput",
    "Transformer",
    "TransformerConfig",
    "TransformerLM",
    "TransformerLMConfig",
]

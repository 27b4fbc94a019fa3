"""Models built on the attention core: one file (or folder, for a family with a lean decode path
beside its module path) per family, each with its frozen config; the family registry
(:mod:`qkv.models.registry`), named presets (:mod:`qkv.models.presets`) and typed outputs
(:mod:`qkv.models.outputs`).

Every family is exported here; each is imported on first use, so ``import qkv.models`` is cheap.
"""

from __future__ import annotations

from qkv.lazy import lazy_exports

# Exported name -> the module that defines it.
_EXPORTS = {
    "BertConfig": "qkv.models.bert.model",
    "BertEncoder": "qkv.models.bert.model",
    "ClozeReader": "qkv.models.cloze_reader",
    "ClozeReaderConfig": "qkv.models.cloze_reader",
    "EncoderClassifier": "qkv.models.classifier",
    "EncoderClassifierConfig": "qkv.models.classifier",
    "EncoderSpanReader": "qkv.models.encoder_span_reader",
    "EncoderSpanReaderConfig": "qkv.models.encoder_span_reader",
    "Seq2SeqRNN": "qkv.models.seq2seq_rnn",
    "Seq2SeqRNNConfig": "qkv.models.seq2seq_rnn",
    "SequenceTagger": "qkv.models.tagger",
    "SequenceTaggerConfig": "qkv.models.tagger",
    "ShowAttendTell": "qkv.models.show_attend_tell.model",
    "ShowAttendTellConfig": "qkv.models.show_attend_tell.model",
    "SpanReader": "qkv.models.span_reader",
    "SpanReaderConfig": "qkv.models.span_reader",
    "Transformer": "qkv.models.transformer.model",
    "TransformerConfig": "qkv.models.transformer.config",
    "TransformerLM": "qkv.models.language_model.model",
    "TransformerLMConfig": "qkv.models.language_model.model",
    "ViT": "qkv.models.vit",
    "ViTConfig": "qkv.models.vit",
    "BertOutput": "qkv.models.outputs",
    "ClassifierOutput": "qkv.models.outputs",
    "LMOutput": "qkv.models.outputs",
    "Seq2SeqOutput": "qkv.models.outputs",
    "StepOutput": "qkv.models.outputs",
    "TaggerOutput": "qkv.models.outputs",
    "build_config": "qkv.models.registry",
    "build_model": "qkv.models.registry",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

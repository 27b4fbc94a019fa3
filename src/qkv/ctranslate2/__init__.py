"""CTranslate2 as a serving backend (the ``ctranslate2`` extra): convert qkv's Transformers into
CTranslate2 specs, export a trained model directory, run it with qkv's tokenizers, input checks
and decoding rules."""

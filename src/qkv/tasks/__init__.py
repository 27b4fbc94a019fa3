"""Task pipelines: data, model, training, decoding and evaluation wired together."""

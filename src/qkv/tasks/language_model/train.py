"""Language modelling end to end: train a decoder-only Transformer on a text corpus, generate
from it, and score it (perplexity; bits per character).

A trained model directory holds ``config.json`` (with ``task: language_model``),
``model.safetensors`` (the best weights by validation loss), ``tokenizer.json`` (a character
vocabulary or a byte-level BPE), ``metrics.csv`` and the run's checkpoints.

Training reads the corpus as one stream of token ids cut into windows of ``block_size + 1``
tokens (inputs and next-token targets); each epoch starts the windows at a different offset and
shuffles them, both a pure function of ``(seed, epoch)``, so a resumed run sees the same data.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from qkv.data.lm.corpora import load_text_corpus
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.tasks.language_model.config import LMDataConfig
from qkv.tasks.language_model.inputs import (
    lm_batches,
    lm_loss,
    load_tokenizer,
    train_tokenizer,
)
from qkv.tasks.run_dir import TOKENIZER_FILE
from qkv.tasks.run_skeleton import Trained, TrainingRun

logger = logging.getLogger(__name__)


def model_values(model: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """The model section with its ``preset`` expanded and the tokenizer's vocabulary size."""
    return {**with_preset("transformer_lm", model), "vocab_size": vocab_size}


def train_language_model(run: TrainingRun) -> Trained:
    """Train ``config``'s language model on its corpus; the best weights (by validation loss)
    go to ``config.out_dir``."""
    config = run.config
    data = config.section("data", LMDataConfig)
    corpus = load_text_corpus(data.corpus, **data.options)
    tokenizer = run.shared(
        make=lambda: train_tokenizer(data, corpus.train),
        load=lambda out: load_tokenizer(out / TOKENIZER_FILE),
        save=lambda tok, out: tok.save(out / TOKENIZER_FILE),
    )
    train_ids = torch.tensor(tokenizer.encode(corpus.train), dtype=torch.long)
    valid_ids = torch.tensor(tokenizer.encode(corpus.valid), dtype=torch.long)
    if data.valid_tokens is not None:
        valid_ids = valid_ids[: data.valid_tokens + 1]
    model_config = build_config(config.family, model_values(config.model, tokenizer.vocab_size))
    if data.block_size > model_config.max_len:
        raise ValueError(
            f"data.block_size={data.block_size} exceeds the model's max_len={model_config.max_len}"
        )
    model = build_model(config.family, model_config)
    run.save(model_config, write=lambda directory: tokenizer.save(directory / TOKENIZER_FILE))
    batch_size = max(1, config.train.batch_tokens // data.block_size)

    def evaluate() -> dict[str, float]:
        total, tokens = 0.0, 0
        for batch in lm_batches(
            valid_ids, block_size=data.block_size, batch_size=batch_size, shuffle=False
        ):
            loss, n = lm_loss(model, batch.to(next(model.parameters()).device))
            total, tokens = total + float(loss), tokens + int(n)
        return {"valid_loss": total / max(tokens, 1)}

    return run.train(
        model,
        loss_fn=lm_loss,
        batches=lambda epoch, start: lm_batches(
            train_ids,
            block_size=data.block_size,
            batch_size=batch_size,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        evaluate=evaluate,
        metric="valid_loss",
        higher_is_better=False,
        count_tokens=lambda batch: batch.targets.numel(),
    )

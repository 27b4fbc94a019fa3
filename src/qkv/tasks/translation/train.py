"""Translation end to end: train a model on a parallel corpus, translate, evaluate.

A trained model directory is self-contained:

    config.json             the run configuration (model family and config, data, decode)
    model.safetensors       the best weights (by validation BLEU)
    source_tokenizer.json   BPE vocabularies (the same file twice when shared)
    target_tokenizer.json
    metrics.csv             training curve and validation scores
    results.json            test scores written by ``evaluate``
    snapshots/10min/ ...    with ``train.snapshot_minutes``: the weights as they were when the
                            budget clock passed each mark, each a model directory of its own
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from torch import Tensor, nn

from qkv.data import (
    Seq2SeqBatch,
    SubwordTokenizer,
    batches,
    encode_pairs,
    load_corpus,
)
from qkv.data.tokens.special import PAD_ID
from qkv.evaluation.bleu import corpus_scores
from qkv.models.registry import build_config, build_model
from qkv.tasks.run_dir import SOURCE_TOKENIZER, TARGET_TOKENIZER, save_results
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.translation.config import DataConfig, DecodeConfig
from qkv.tasks.translation.report import EvaluationReport
from qkv.tasks.translation.runner import Translator
from qkv.training.losses import sequence_cross_entropy

logger = logging.getLogger(__name__)


def translation_loss(label_smoothing: float):
    """``loss_fn(model, batch) -> (summed token loss, target tokens)`` for the training engine."""

    def loss_fn(model: nn.Module, batch: Seq2SeqBatch) -> tuple[Tensor, Tensor]:
        logits = model(batch.src, batch.src_lengths, batch.tgt_in).logits  # (B, T, V)
        return sequence_cross_entropy(
            logits, batch.tgt_out, pad_id=PAD_ID, label_smoothing=label_smoothing
        )

    return loss_fn


def train_tokenizers(
    pairs: Sequence[tuple[str, str]], vocab_size: int, shared: bool
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    if shared:
        tok = SubwordTokenizer.train([s for p in pairs for s in p], vocab_size)
        return tok, tok
    return (
        SubwordTokenizer.train([s for s, _ in pairs], vocab_size),
        SubwordTokenizer.train([t for _, t in pairs], vocab_size),
    )


def train_translation(run: TrainingRun) -> Trained:
    """Train ``config``'s model on its corpus; the best weights (by validation BLEU, or loss
    when ``data.valid_bleu_sentences`` is 0) go to ``config.out_dir``.

    Args:
        resume: continue the run in ``config.out_dir`` from its latest checkpoint (use
            :func:`qkv.tasks.run_dir.resume_config` for its configuration); its tokenizers are
            reused.
        overwrite: start afresh in a directory that already holds a run (its outputs are
            removed first); without it such a directory is an error.
        handle_signals: on SIGINT/SIGTERM, finish the step, checkpoint and return.
        distributed: this process's rank under torchrun: rank 0 trains the tokenizers and
            writes every file; the other ranks read the tokenizers it wrote.
    """
    config = run.config
    data = config.section("data", DataConfig)
    corpus = load_corpus(data.corpus, **data.options)
    src_tok, tgt_tok = run.shared(
        make=lambda: train_tokenizers(corpus.train, data.vocab_size, data.shared_vocab),
        load=lambda out: (SubwordTokenizer.load(out / SOURCE_TOKENIZER),
                          SubwordTokenizer.load(out / TARGET_TOKENIZER)),
        save=lambda toks, out: _write_tokenizers(out, *toks),
    )  # fmt: skip
    train_examples = encode_pairs(corpus.train, src_tok, tgt_tok, max_len=data.max_len)
    if not train_examples:
        raise ValueError(f"no training pair fits data.max_len={data.max_len}")
    valid_pairs = corpus.valid[: max(data.valid_bleu_sentences, 1)]
    valid_examples = encode_pairs(corpus.valid, src_tok, tgt_tok)

    model_values = {
        **config.model,
        "src_vocab_size": src_tok.vocab_size,
        "tgt_vocab_size": tgt_tok.vocab_size,
    }
    model_config = build_config(config.family, model_values)
    model = build_model(config.family, model_config)
    run.save(model_config, write=lambda directory: _write_tokenizers(directory, src_tok, tgt_tok))

    loss_fn = translation_loss(config.train.label_smoothing)
    translator = Translator(model, src_tok, tgt_tok, config.section("decode", DecodeConfig))

    def evaluate() -> dict[str, float]:
        total, tokens = 0.0, 0
        for batch in batches(valid_examples, max_tokens=config.train.batch_tokens, shuffle=False):
            loss_sum, n = loss_fn(model, batch.to(next(model.parameters()).device))
            total, tokens = total + float(loss_sum), tokens + int(n)
        metrics = {"valid_loss": total / max(tokens, 1)}
        if data.valid_bleu_sentences:
            hyps = [t.text for t in translator.translate([s for s, _ in valid_pairs], beam_size=1)]
            metrics["valid_bleu"] = corpus_scores(hyps, [t for _, t in valid_pairs]).bleu
        return metrics

    def train_batches(epoch: int, start: int) -> Iterator[Seq2SeqBatch]:
        return batches(
            train_examples,
            max_tokens=config.train.batch_tokens,
            shuffle=True,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        )

    metric = "valid_bleu" if data.valid_bleu_sentences else "valid_loss"
    return run.train(
        model,
        loss_fn=loss_fn,
        batches=train_batches,
        evaluate=evaluate,
        metric=metric,
        higher_is_better=metric == "valid_bleu",
        count_tokens=lambda batch: int((batch.tgt_out != PAD_ID).sum()),
    )


def _write_tokenizers(
    directory: Path, src_tok: SubwordTokenizer, tgt_tok: SubwordTokenizer
) -> None:
    src_tok.save(directory / SOURCE_TOKENIZER)
    tgt_tok.save(directory / TARGET_TOKENIZER)


def evaluate_translation(
    model_dir: str | Path,
    *,
    split: str = "test",
    limit: int | None = None,
    beam_size: int | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    save: bool = True,
) -> EvaluationReport:
    """:meth:`Translator.evaluate` of the model in ``model_dir``; with ``save`` and no
    ``limit``, the scores also go to its ``results.json`` (:func:`save_translation_results`)."""
    report = Translator.load(model_dir).evaluate(
        split, limit=limit, beam_size=beam_size, batch_size=batch_size, progress=progress
    )
    if save and limit is None:
        save_translation_results(model_dir, report)
    return report


def save_translation_results(model_dir: str | Path, report: EvaluationReport) -> Path:
    """Record ``report`` under its split in ``model_dir/results.json`` (other splits kept);
    an ``OSError`` (a read-only directory) names the file. Returns its path."""
    return save_results(model_dir, report.split, report.record())

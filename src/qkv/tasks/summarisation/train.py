"""Summarisation and dialogue end to end: the encoder-decoder's other applications.

Both tasks train a sequence-to-sequence model (``seq2seq_rnn`` or ``transformer``, plain or a
pointer-generator with coverage: ``model.copy``, ``model.coverage``; See et al. 2017) on
``(source, target)`` pairs over one word vocabulary (:mod:`qkv.tasks.summarisation.inputs`), pick
the best weights by validation ROUGE-L (or loss) and decode with beam search, its trigram block
and minimum length. They differ in their data and in what they are called:

* ``summarisation`` (:class:`~qkv.tasks.summarisation.runner.Summariser`, ``qkv summarize``): a
  text or a
  function's code -> its summary (:mod:`qkv.data.pairs.docstrings`: PEP 257 summary lines; ACLSum;
  user TSV files);
* ``dialogue`` (:class:`~qkv.tasks.summarisation.runner.Replier`, ``qkv reply``,
  :mod:`qkv.tasks.dialogue.task`):
  the previous turns -> the reply (:mod:`qkv.data.pairs.dialogue`: the plays' speeches).

A trained model directory holds ``config.json``, ``model.safetensors``, ``vocab.json`` (the
words, :class:`~qkv.data.pairs.summary_words.SummaryVocab`), ``metrics.csv`` and ``results.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from qkv.data import load_corpus
from qkv.data.pairs.summary_words import SummaryVocab, summary_tokens
from qkv.data.tokens.special import PAD_ID, UNK_ID
from qkv.models.registry import build_config, build_model
from qkv.tasks.init_from import init_from_run, init_run_file
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.summarisation.config import (
    SummaryDataConfig,
    SummaryDecodeConfig,
    SummaryTrainConfig,
)
from qkv.tasks.summarisation.inputs import SummaryBatch, encode_example, example_batches, text_loss
from qkv.tasks.summarisation.runner import VOCAB_FILE, Summariser, TextToText

logger = logging.getLogger(__name__)

FAMILIES = ("seq2seq_rnn", "transformer")


def train_text_to_text(run: TrainingRun, runner: type[TextToText]) -> Trained:
    """Train ``config``'s model for ``runner``'s task; the best weights (by validation ROUGE-L
    over ``data.valid_examples`` greedy outputs, or by loss) go to ``config.out_dir``."""
    config = run.config
    data = config.section("data", SummaryDataConfig)
    train_config = config.section("train", SummaryTrainConfig)
    corpus = load_corpus(data.corpus, **data.options)
    init_from = None if run.resume else train_config.init_from  # a resume has its checkpoint
    vocab_run = _vocab_run(init_from, data.vocab_from)
    vocab = run.shared(
        make=lambda: SummaryVocab.load(init_run_file(vocab_run[0], VOCAB_FILE, vocab_run[1]))
        if vocab_run
        else SummaryVocab.build(
            (summary_tokens(text) for pair in corpus.train for text in pair),
            data.vocab_size, data.min_count,
        ),
        load=lambda out: SummaryVocab.load(out / VOCAB_FILE),
        save=lambda v, out: v.save(out / VOCAB_FILE),
    )  # fmt: skip
    examples = [encode_example(s, t, vocab, data.max_source_len) for s, t in corpus.train]
    kept = [e for e in examples if len(e.tgt) <= data.max_target_len]
    if not kept:
        raise ValueError(f"no training pair has a target of at most {data.max_target_len} words")
    logger.info("%d of %d training pairs (targets of at most %d words), %d words",
                len(kept), len(examples), data.max_target_len, len(vocab))  # fmt: skip
    valid_examples = [encode_example(s, t, vocab) for s, t in corpus.valid]
    valid_pairs = corpus.valid[: data.valid_examples]

    model_values = {**config.model, "src_vocab_size": len(vocab), "tgt_vocab_size": len(vocab),
                    "unk_id": UNK_ID}  # fmt: skip
    model_config = build_config(config.family, model_values)
    model = build_model(config.family, model_config)
    if init_from is not None:  # before the run writes a file: a mismatch leaves nothing
        added = init_from_run(model, init_from)
        logger.info("weights from %s (added at zero: %s)", init_from, ", ".join(added) or "none")
    run.save(model_config, write=lambda directory: vocab.save(Path(directory) / VOCAB_FILE))

    loss_fn = text_loss(model_config.copy, train_config.coverage_weight)
    evaluator = runner(model, vocab, config.section("decode", SummaryDecodeConfig))
    plain_loss = text_loss(model_config.copy, 0.0)

    def evaluate() -> dict[str, float]:
        total, tokens = 0.0, 0
        for batch in example_batches(valid_examples, max_tokens=train_config.batch_tokens,
                                     shuffle=False):  # fmt: skip
            loss_sum, n = plain_loss(model, batch.to(next(model.parameters()).device))
            total, tokens = total + float(loss_sum), tokens + int(n)
        metrics = {"valid_loss": total / max(tokens, 1)}
        if valid_pairs:
            from qkv.evaluation.summaries import rouge_scores

            outputs = evaluator.respond([s for s, _ in valid_pairs], beam_size=1)
            references = [" ".join(summary_tokens(t)) for _, t in valid_pairs]
            metrics["valid_rouge_l"] = rouge_scores([o.text for o in outputs], references)["rougeL"]
        return metrics

    def train_batches(epoch: int, start: int) -> Iterator[SummaryBatch]:
        return example_batches(kept, max_tokens=train_config.batch_tokens, shuffle=True,
                               seed=train_config.seed, epoch=epoch, start=start)  # fmt: skip

    metric = "valid_rouge_l" if valid_pairs else "valid_loss"
    return run.train(
        model,
        loss_fn=loss_fn,
        batches=train_batches,
        evaluate=evaluate,
        metric=metric,
        higher_is_better=metric == "valid_rouge_l",
        count_tokens=lambda batch: int((batch.tgt_out != PAD_ID).sum()),
    )


def _vocab_run(init_from: str | None, vocab_from: str | None) -> tuple[str, str] | None:
    """The run whose vocabulary this run reads and the setting that named it
    (``train.init_from``: its weights need its ids; or ``data.vocab_from``), or ``None``."""
    if init_from and vocab_from and Path(init_from).resolve() != Path(vocab_from).resolve():
        raise ValueError(
            f"train.init_from={init_from} and data.vocab_from={vocab_from} name different runs: "
            "a run started from another's weights reads that run's vocabulary; leave out "
            "data.vocab_from"
        )
    if init_from:
        return init_from, "train.init_from"
    return None if vocab_from is None else (vocab_from, "data.vocab_from")


def train_summariser(run: TrainingRun) -> Trained:
    """:func:`train_text_to_text` for a :class:`~qkv.tasks.summarisation.runner.Summariser`."""
    return train_text_to_text(run, Summariser)

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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from qkv.data import (
    Seq2SeqBatch,
    SubwordTokenizer,
    batches,
    encode_pairs,
    load_corpus,
)
from qkv.data.tokenizer import check_vocab_size
from qkv.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from qkv.decoding import beam_search, greedy_search
from qkv.evaluation.bleu import BucketScore, CorpusScores, bleu_by_length, corpus_scores
from qkv.io import atomic_write_json
from qkv.models.registry import build_config, build_model, config_to_dict
from qkv.tasks.input_checks import (
    LengthLimits,
    check_lengths,
    longest_token,
    one_text,
    refuse_absurd,
    text_list,
    warn_unknown,
)
from qkv.tasks.run_config import MAX_BEAM_SIZE, DecodeConfig, RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    WEIGHTS_FILE,
    claim_run_dir,
    load_model_run_config,
    snapshot_dir,
)
from qkv.training.checkpoint import load_weights, read_json, save_weights
from qkv.training.distributed import Distributed
from qkv.training.losses import sequence_cross_entropy
from qkv.training.trainer import TrainResult, train, training_device

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Translation:
    source: str
    text: str
    source_pieces: list[str]  # the S source tokens the model saw (EOS included)
    target_ids: list[int]  # the generated token ids (EOS excluded)
    target_pieces: list[str]  # the generated tokens (EOS included)
    attention: Tensor | None  # (len(target_pieces), S), or None for models without attention


@dataclass(frozen=True)
class TrainedTranslation:
    model_dir: Path
    result: TrainResult
    parameters: int


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


def train_translation(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> TrainedTranslation:
    """Train ``config``'s model on its corpus; the best weights go to ``config.out_dir``.

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
    dist_ = distributed or Distributed()
    out = Path(config.out_dir)
    training_device(config.train, dist_)  # reject what can be rejected before any write
    if not resume and dist_.main:
        claim_run_dir(out, overwrite)
    torch.manual_seed(config.train.seed)
    corpus = load_corpus(config.data.corpus, **config.data.options)
    if resume or not dist_.main:
        dist_.barrier()  # rank 0 has written the tokenizers (a no-op in one process)
        src_tok = SubwordTokenizer.load(out / SOURCE_TOKENIZER)
        tgt_tok = SubwordTokenizer.load(out / TARGET_TOKENIZER)
    else:
        src_tok, tgt_tok = train_tokenizers(
            corpus.train, config.data.vocab_size, config.data.shared_vocab
        )
    train_examples = encode_pairs(corpus.train, src_tok, tgt_tok, max_len=config.data.max_len)
    if not train_examples:
        raise ValueError(f"no training pair fits data.max_len={config.data.max_len}")
    valid_pairs = corpus.valid[: max(config.data.valid_bleu_sentences, 1)]
    valid_examples = encode_pairs(corpus.valid, src_tok, tgt_tok)

    model_values = {
        **config.model,
        "src_vocab_size": src_tok.vocab_size,
        "tgt_vocab_size": tgt_tok.vocab_size,
    }
    model_config = build_config(config.family, model_values)
    model = build_model(config.family, model_config)
    saved = config.to_dict()
    saved["model"] = {"family": config.family, **config_to_dict(model_config)}
    if dist_.main:
        _write_model_files(out, saved, src_tok, tgt_tok)
        if not resume:
            dist_.barrier()  # let the other ranks read the tokenizers

    loss_fn = translation_loss(config.train.label_smoothing)
    translator = Translator(model, src_tok, tgt_tok, config.decode)

    def evaluate() -> dict[str, float]:
        total, tokens = 0.0, 0
        for batch in batches(valid_examples, max_tokens=config.train.batch_tokens, shuffle=False):
            loss_sum, n = loss_fn(model, batch)
            total, tokens = total + float(loss_sum), tokens + int(n)
        metrics = {"valid_loss": total / max(tokens, 1)}
        if config.data.valid_bleu_sentences:
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

    def snapshot(minutes: float, step: int) -> None:
        directory = snapshot_dir(out, minutes)
        _write_model_files(
            directory, {**saved, "snapshot": {"minutes": minutes, "step": step}}, src_tok, tgt_tok
        )
        save_weights(model, directory / WEIGHTS_FILE)

    metric = "valid_bleu" if config.data.valid_bleu_sentences else "valid_loss"
    result = train(
        model,
        loss_fn=loss_fn,
        batches=train_batches,
        config=config.train,
        evaluate=evaluate,
        metric=metric,
        higher_is_better=metric == "valid_bleu",
        on_best=lambda _: save_weights(model, out / WEIGHTS_FILE),
        on_snapshot=snapshot,
        run_dir=out,
        resume=resume,
        handle_signals=handle_signals,
        progress=progress,
        count_tokens=lambda batch: int((batch.tgt_out != PAD_ID).sum()),
        distributed=dist_,
    )
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return TrainedTranslation(out, result, parameters)


def _write_model_files(
    directory: Path, config: dict[str, Any], src_tok: SubwordTokenizer, tgt_tok: SubwordTokenizer
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / CONFIG_FILE, config)
    src_tok.save(directory / SOURCE_TOKENIZER)
    tgt_tok.save(directory / TARGET_TOKENIZER)


SPLIT_ADVICE = "split it into sentences and translate those"


class Translator:
    """A model with its tokenizers and decoding settings: text in, text and attention out.

    ``limits`` are the source lengths in subword tokens (EOS not counted): a model from
    :meth:`load` was trained on sentences of up to ``data.max_len`` tokens and, having no
    position table, takes :data:`~qkv.tasks.input_checks.HARD_LIMIT_FACTOR` times that.
    Longer sources warn; sources over the hard limit are a ``ValueError`` raised before any
    decoding (before tokenizing, when their characters or words already show it). ``None``
    (a model being trained): no length checks. Sources made mostly of ``<unk>`` warn.
    """

    def __init__(
        self,
        model: nn.Module,
        source_tokenizer: SubwordTokenizer,
        target_tokenizer: SubwordTokenizer,
        decode: DecodeConfig,
        *,
        limits: LengthLimits | None = None,
    ) -> None:
        self.model, self.source_tokenizer, self.target_tokenizer = (
            model,
            source_tokenizer,
            target_tokenizer,
        )
        self.decode, self.limits = decode, limits

    @classmethod
    def load(cls, model_dir: str | Path) -> Translator:
        """Load a directory written by :func:`train_translation`; errors name what is wrong."""
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"no model directory {model_dir}")
        run = load_model_run_config(model_dir)
        if run.task != "translation":
            raise ValueError(f"{model_dir} holds a {run.task} model, not a translation model")
        model_config = build_config(run.family, run.model)
        model = build_model(run.family, model_config)
        load_weights(model, model_dir / WEIGHTS_FILE)
        model.eval()
        tokenizers = []
        for name, size in ((SOURCE_TOKENIZER, model_config.src_vocab_size),
                           (TARGET_TOKENIZER, model_config.tgt_vocab_size)):  # fmt: skip
            tokenizers.append(SubwordTokenizer.load(model_dir / name))
            check_vocab_size(model_dir / name, tokenizers[-1].vocab_size, size)
        return cls(
            model,
            *tokenizers,
            run.decode,
            limits=LengthLimits.without_table(run.data.max_len),  # type: ignore[union-attr]
        )

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.source_tokenizer)

    def _encode(self, texts: list[str], *, single: bool) -> list[list[int]]:
        """Source ids of each text, EOS added, after the length and unknown-token checks
        (warnings point at the caller of the public method)."""
        limits = self.limits
        if limits is not None:
            refuse_absurd(
                texts,
                limits,
                chars_per_token=self._longest_token,
                advice=SPLIT_ADVICE,
                single=single,
            )
        ids = [self.source_tokenizer.encode(text) for text in texts]
        if limits is not None:
            check_lengths(
                [len(row) for row in ids],
                texts,
                limits,
                advice=SPLIT_ADVICE,
                consequence="translations this long may stop short or go astray; split long "
                "texts into sentences",
                single=single,
                stacklevel=4,
            )
        warn_unknown(
            ids,
            texts,
            UNK_ID,
            consequence="the model cannot read them, so their translations mean little",
            single=single,
            stacklevel=4,
        )
        return [[*row, EOS_ID] for row in ids]

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> list[Translation]:
        """Translate ``texts``, a list of str, in batches of similar length (greedy when
        ``beam_size`` is 1). A bare str is a ``TypeError`` (it would be read as its characters);
        lengths are checked as the class says.

        ``batch_size`` overrides the model's ``decode.batch_size`` (sentences per batch);
        ``progress`` shows a bar with sentences per second on stderr.
        """
        texts = text_list(texts)
        beam_size, batch_size = self._check_sizes(beam_size, batch_size)
        encoded = self._encode(texts, single=False)
        return self._translate(texts, encoded, beam_size, batch_size, progress)

    def _check_sizes(self, beam_size: int | None, batch_size: int | None) -> tuple[int, int]:
        beam_size = self.decode.beam_size if beam_size is None else beam_size
        batch_size = self.decode.batch_size if batch_size is None else batch_size
        if not 1 <= beam_size <= MAX_BEAM_SIZE:
            raise ValueError(f"beam_size must be between 1 and {MAX_BEAM_SIZE}, got {beam_size}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return beam_size, batch_size

    def _translate(
        self,
        texts: list[str],
        encoded: list[list[int]],
        beam_size: int,
        batch_size: int,
        progress: bool = False,
    ) -> list[Translation]:
        was_training = self.model.training
        self.model.eval()
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        results: list[Translation | None] = [None] * len(texts)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc="translate", unit="sent", dynamic_ncols=True)
        try:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                for i, hyp in zip(
                    rows, self._decode([encoded[i] for i in rows], beam_size), strict=True
                ):
                    results[i] = self._translation(texts[i], encoded[i], hyp)
                if bar is not None:
                    bar.update(len(rows))
        finally:
            self.model.train(was_training)
            if bar is not None:
                bar.close()
        return results  # type: ignore[return-value]

    def cross_attention(
        self, text: str, *, beam_size: int | None = None
    ) -> tuple[Translation, list[Tensor]]:
        """Translate ``text``, then run the model on its own output (teacher forcing) to get
        every layer's cross-attention: one ``(H, T, S)`` tensor per layer (``H = 1`` for RNNs),
        ``T`` counting the EOS. Empty for a model without attention.
        """
        translation, maps = self.attentions(text, beam_size=beam_size)
        return translation, maps.get("cross", [])

    def token_count(self, text: str) -> int:
        """The source tokens the encoder reads for ``text``, end of sentence included."""
        return len(self.source_tokenizer.encode(one_text(text))) + 1

    def attentions(
        self, text: str, *, beam_size: int | None = None
    ) -> tuple[Translation, dict[str, list[Tensor]]]:
        """Translate ``text``, then run the model on its own output (teacher forcing) and
        return every attention it has, by kind, one ``(H, Tq, Tk)`` tensor per layer:
        ``"cross"`` ``(H, T, S)`` (the only one of an RNN, ``H = 1``; none for the
        fixed-context baseline), and for Transformers ``"encoder"`` ``(H, S, S)`` and
        ``"decoder"`` ``(H, T, T)``. ``S`` counts the source EOS, ``T`` the target EOS: row
        ``t`` is the step that produced ``translation.target_pieces[t]`` from the inputs
        ``<s>``, ``target_pieces[:t]``. ``text`` is checked as :meth:`translate` checks
        each of its texts."""
        text = one_text(text, several="translate(texts)")
        beam_size, _ = self._check_sizes(beam_size, None)
        (source,) = self._encode([text], single=True)
        (translation,) = self._translate([text], [source], beam_size, 1)
        device = _device_of(self.model)
        src = torch.tensor([source], device=device)
        tgt_in = torch.tensor([[BOS_ID, *translation.target_ids]], device=device)
        lengths = torch.tensor([len(source)], device=device)
        with torch.inference_mode():
            out = self.model.eval()(src, lengths, tgt_in, need_weights=True)
        maps = {
            kind: [layer[0] for layer in layers]  # (H, Tq, Tk) per layer
            for kind, layers in out.attentions.items()
            if layers
        }
        return translation, maps

    def _decode(self, sources: list[list[int]], beam_size: int) -> list[Any]:
        lengths = torch.tensor([len(s) for s in sources])
        src = torch.full((len(sources), int(lengths.max())), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids)] = torch.tensor(ids)
        device = _device_of(self.model)
        src, lengths = src.to(device), lengths.to(device)
        # Each sentence's own limit: its output never depends on the rest of its batch.
        max_len = [self.decode.max_len(len(s)) for s in sources]
        with torch.inference_mode():
            if beam_size == 1:
                return greedy_search(self.model, src, lengths, max_len=max_len)
            nbest = beam_search(
                self.model,
                src,
                lengths,
                beam_size=beam_size,
                max_len=max_len,
                length_penalty=self.decode.length_penalty,
            )
        return [hyps[0] for hyps in nbest]

    def _translation(self, text: str, source_ids: list[int], hyp: Any) -> Translation:
        tokens = list(hyp.tokens)
        return Translation(
            source=text,
            text=self.target_tokenizer.decode(tokens),
            source_pieces=self.source_tokenizer.pieces(source_ids),
            target_ids=tokens,
            target_pieces=self.target_tokenizer.pieces([*tokens, EOS_ID]),
            attention=None if hyp.attention is None else hyp.attention[:, : len(source_ids)],
        )


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@dataclass(frozen=True)
class EvaluationReport:
    split: str
    scores: CorpusScores
    buckets: list[BucketScore]
    examples: list[tuple[str, str, str]]  # (source, hypothesis, reference)
    beam_size: int
    exact_match: float  # fraction of hypotheses identical to their reference


def evaluate_translation(
    model_dir: str | Path,
    *,
    split: str = "test",
    limit: int | None = None,
    beam_size: int | None = None,
    batch_size: int | None = None,
    translator: Translator | None = None,
    progress: bool = False,
    save: bool = True,
) -> EvaluationReport:
    """BLEU, chrF and BLEU by source length on a split of the model's own corpus; with
    ``save`` and no ``limit``, the scores also go to ``results.json`` in ``model_dir``
    (:func:`save_translation_results`)."""
    model_dir = Path(model_dir)
    run = load_model_run_config(model_dir)
    corpus = load_corpus(run.data.corpus, **run.data.options)
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be train, valid or test, got {split!r}")
    pairs = getattr(corpus, split)[:limit]
    if not pairs:
        raise ValueError(f"the {split} split of {run.data.corpus} is empty")
    translator = translator or Translator.load(model_dir)
    beam = run.decode.beam_size if beam_size is None else beam_size
    translations = translator.translate(
        [s for s, _ in pairs], beam_size=beam, batch_size=batch_size, progress=progress
    )
    hyps = [t.text for t in translations]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    report = EvaluationReport(
        split,
        corpus_scores(hyps, refs),
        bleu_by_length(sources, hyps, refs),
        list(zip(sources, hyps, refs, strict=True)),
        beam,
        sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs),
    )
    if save and limit is None:
        save_translation_results(model_dir, report)
    return report


def save_translation_results(model_dir: str | Path, report: EvaluationReport) -> Path:
    """Record ``report`` under its split in ``model_dir/results.json`` (other splits kept);
    an ``OSError`` (a read-only directory) names the file. Returns its path."""
    results_path = Path(model_dir) / "results.json"
    results = read_json(results_path) if results_path.is_file() else {}
    results[report.split] = {
        "bleu": report.scores.bleu,
        "chrf": report.scores.chrf,
        "bleu_signature": report.scores.bleu_signature,
        "chrf_signature": report.scores.chrf_signature,
        "sentences": report.scores.sentences,
        "exact_match": report.exact_match,
        "beam_size": report.beam_size,
        "bleu_by_source_length": {b.label: [b.sentences, b.bleu] for b in report.buckets},
    }
    atomic_write_json(results_path, results)
    return results_path


__all__ = [
    "EvaluationReport",
    "TrainedTranslation",
    "Translation",
    "Translator",
    "evaluate_translation",
    "save_translation_results",
    "train_translation",
]

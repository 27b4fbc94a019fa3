"""A trained translation model as a runner: text in, translations and attention out; its
scores on a split of its corpus (:meth:`Translator.evaluate`, :meth:`Translator.report`) and the
views of one translation's attention (:meth:`Translator.views`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from qkv.data import SubwordTokenizer, load_corpus
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.data.tokens.subword import check_vocab_size
from qkv.decoding import beam_search, greedy_search
from qkv.decoding.workers import map_batches
from qkv.evaluation.bleu import bleu_by_length, corpus_scores
from qkv.layers.packed_linear import Precision, check_precision
from qkv.models import lean_step
from qkv.models.registry import build_config, build_model
from qkv.models.transformer import decode as transformer_decode
from qkv.tasks.input_checks import (
    LengthLimits,
    longest_token,
    one_text,
    text_list,
)
from qkv.tasks.run_dir import (
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    WEIGHTS_FILE,
    check_split,
    load_model_run_config,
)
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import GIVEN, EvaluateOptions, Report, ViewOptions
from qkv.tasks.translation.config import DataConfig, DecodeConfig
from qkv.tasks.translation.inputs import source_ids
from qkv.tasks.translation.report import EvaluationReport
from qkv.tasks.view_extras import checked_views, seq2seq_extras, seq2seq_vectors
from qkv.training.checkpoint import load_weights

# The attentions of a translation model, in the order shown: (id, title, queries, keys) with
# "source", "target" and "read" (what the decoder read at each step: <s>, then its outputs).
VIEWS = (
    ("cross", "cross-attention (target x source)", "target", "source"),
    ("encoder", "encoder self-attention", "source", "source"),
    ("decoder", "decoder self-attention (output step x tokens read)", "target", "read"),
)


@dataclass(frozen=True)
class Translation:
    source: str
    text: str
    source_pieces: list[str]  # the S source tokens the model saw (EOS included)
    target_ids: list[int]  # the generated token ids (EOS excluded)
    target_pieces: list[str]  # the generated tokens (EOS included)
    # (len(target_pieces), S) when translate(attention=True) asked for it and the model has it
    attention: Tensor | None


class Translator:
    """A model with its tokenizers and decoding settings: text in, text and attention out.

    ``limits`` are the source lengths in subword tokens (EOS not counted): a model from
    :meth:`load` was trained on sentences of up to ``data.max_len`` tokens and, having no
    position table, takes :data:`~qkv.tasks.input_checks.HARD_LIMIT_FACTOR` times that.
    Longer sources warn; sources over the hard limit are a ``ValueError`` raised before any
    decoding (before tokenizing, when their characters or words already show it). ``None``
    (a model being trained): no length checks. Sources made mostly of ``<unk>`` warn.

    A Transformer (without a copy head) decodes through its lean decode step
    (:class:`~qkv.models.transformer.decode.LeanTranslationDecoder`) with its weights in
    ``precision``: ``"float32"`` gives the module path's translations token for token;
    ``"bfloat16"`` and ``"int8"`` (:mod:`qkv.layers.packed_linear`) are faster where the CPU has
    the kernels and may translate a little differently. An RNN (without a copy head) decodes
    through its lean step (:class:`~qkv.models.rnn_decode.LeanRNNDecoder`), float32 only, with
    the module path's translations. Copying models decode through their module path, in
    float32 only (:func:`~qkv.models.lean_step.lean_step_model` decides).
    """

    takes_target = True  # views(text, ViewOptions(target=...)) reads a given translation

    def __init__(
        self,
        model: nn.Module,
        source_tokenizer: SubwordTokenizer,
        target_tokenizer: SubwordTokenizer,
        decode: DecodeConfig,
        *,
        limits: LengthLimits | None = None,
        data: DataConfig | None = None,
        precision: Precision = "float32",
    ) -> None:
        self.model, self.source_tokenizer, self.target_tokenizer = (
            model,
            source_tokenizer,
            target_tokenizer,
        )
        self.decode, self.limits, self.data = decode, limits, data
        self.precision = check_precision(precision)
        if precision != "float32" and not transformer_decode.has_lean_step(model):
            raise ValueError(
                f"precision {precision} needs a Transformer without a copy head (its lean "
                f"decode step); this {type(model).__name__} decodes in float32 only"
            )

    @classmethod
    def load(cls, model_dir: str | Path, *, precision: Precision = "float32") -> Translator:
        """Load a directory written by :func:`~qkv.tasks.translation.train.train_translation`, to
        decode in ``precision``; errors name what is wrong."""
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"no model directory {model_dir}")
        run = load_model_run_config(model_dir)
        if run.task != "translation":
            raise ValueError(f"{model_dir} holds a {run.task} model, not a translation model")
        model_config = build_config(run.family, run.model)
        data = run.section("data", DataConfig)
        model = build_model(run.family, model_config)
        load_weights(model, model_dir / WEIGHTS_FILE)
        model.eval()
        tokenizers = []
        for name, size in ((SOURCE_TOKENIZER, model_config.src_vocab_size),
                           (TARGET_TOKENIZER, model_config.tgt_vocab_size)):  # fmt: skip
            tokenizers.append(SubwordTokenizer.load(model_dir / name))
            check_vocab_size(model_dir / name, tokenizers[-1].vocab_size, size)
        source_tokenizer, target_tokenizer = tokenizers
        return cls(
            model,
            source_tokenizer=source_tokenizer,
            target_tokenizer=target_tokenizer,
            decode=run.section("decode", DecodeConfig),
            limits=LengthLimits.without_table(data.max_len),
            data=data,
            precision=precision,
        )

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.source_tokenizer)

    def _encode(self, texts: list[str], *, single: bool, stacklevel: int = 5) -> list[list[int]]:
        """Source ids of each text, EOS added, after the checks of :func:`source_ids`
        (warnings point at the caller of the public method: ``stacklevel`` 5 when that method
        calls this one)."""
        longest = 0 if self.limits is None else self._longest_token  # read only with limits
        ids = source_ids(
            texts, self.source_tokenizer, self.limits, longest=longest, single=single,
            stacklevel=stacklevel,
        )  # fmt: skip
        return [[*row, EOS_ID] for row in ids]

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        batch_size: int | None = None,
        progress: bool = False,
        attention: bool = False,
        workers: int | None = None,
    ) -> list[Translation]:
        """Translate ``texts``, a list of str, in batches of similar length (greedy when
        ``beam_size`` is 1). A bare str is a ``TypeError`` (it would be read as its characters);
        lengths are checked as the class says.

        ``batch_size`` overrides the model's ``decode.batch_size`` (sentences per batch);
        ``progress`` shows a bar with sentences per second on stderr; ``attention`` fills each
        :attr:`Translation.attention` with the search's cross-attention (``None`` otherwise);
        ``workers`` batches are decoded at once, one thread each
        (:func:`~qkv.decoding.workers.map_batches`: faster on a multi-core CPU, the same
        translations); ``None``: as many as PyTorch has threads; 1: one batch at a time on all
        of them.
        """
        texts = text_list(texts)
        beam_size, batch_size = self._check_sizes(beam_size, batch_size)
        encoded = self._encode(texts, single=False)
        return self._translate(texts, encoded, beam_size, batch_size, progress, attention, workers)

    def _check_sizes(self, beam_size: int | None, batch_size: int | None) -> tuple[int, int]:
        return self.decode.sizes(beam_size, batch_size)

    def _translate(
        self,
        texts: list[str],
        encoded: list[list[int]],
        beam_size: int,
        batch_size: int,
        progress: bool = False,
        attention: bool = False,
        workers: int | None = None,
    ) -> list[Translation]:
        was_training = self.model.training
        self.model.eval()
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        results: dict[int, Translation] = {}
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc="translate", unit="sent", dynamic_ncols=True)

        def decode(rows: list[int]) -> list[Any]:
            return self._decode([encoded[i] for i in rows], beam_size, attention)

        try:
            decoded = map_batches(
                decode, batches, torch.get_num_threads() if workers is None else workers
            )
            for rows, hyps in zip(batches, decoded, strict=True):
                for i, hyp in zip(rows, hyps, strict=True):
                    results[i] = self._translation(texts[i], encoded[i], hyp, attention)
                if bar is not None:
                    bar.update(len(rows))
        finally:
            self.model.train(was_training)
            if bar is not None:
                bar.close()
        return [results[i] for i in range(len(texts))]

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
        translation, forward = self._teacher_forced(text, beam_size)
        return translation, forward()

    def _teacher_forced(
        self, text: str, beam_size: int | None, target: str | None = None
    ) -> tuple[Translation, Callable[[], dict[str, list[Tensor]]]]:
        """Translate ``text`` (or take ``target`` as its translation: no decoding) and return
        the teacher-forced pass of :meth:`attentions`, not yet run (the neuron view records that
        pass alone, not the decoding)."""
        text = one_text(text, several="translate(texts)")
        beam_size, _ = self._check_sizes(beam_size, None)
        (source,) = self._encode([text], single=True, stacklevel=6)  # through this method
        if target is None:
            (translation,) = self._translate([text], [source], beam_size, 1)
        else:
            translation = self._given(text, source, target)
        device = _device_of(self.model)
        src = torch.tensor([source], device=device)
        tgt_in = torch.tensor([[BOS_ID, *translation.target_ids]], device=device)
        lengths = torch.tensor([len(source)], device=device)

        def forward() -> dict[str, list[Tensor]]:
            with torch.inference_mode():
                out = self.model.eval()(src, lengths, tgt_in, need_weights=True)
            return {
                kind: [layer[0] for layer in layers]  # (H, Tq, Tk) per layer
                for kind, layers in out.attentions.items()
                if layers
            }

        return translation, forward

    def _given(self, text: str, source: list[int], target: str) -> Translation:
        """``target`` as the translation of ``text`` (its ``source`` ids), as if decoded."""
        ids = self.target_tokenizer.encode(target)
        most = self.decode.max_len(len(source))
        if len(ids) > most:
            raise ValueError(
                f"target has {len(ids)} tokens; this translator writes at most {most} for a "
                f"source of {len(source)} tokens (decode.max_len_a and max_len_b): give a "
                "shorter target"
            )
        return Translation(
            source=text,
            text=self.target_tokenizer.decode(ids),
            source_pieces=self.source_tokenizer.pieces(source),
            target_ids=ids,
            target_pieces=self.target_tokenizer.pieces([*ids, EOS_ID]),
            attention=None,
        )

    def evaluate(
        self,
        split: str = "test",
        *,
        limit: int | None = None,
        beam_size: int | None = None,
        batch_size: int | None = None,
        progress: bool = False,
        workers: int | None = None,
    ) -> EvaluationReport:
        """BLEU, chrF and BLEU by source length on ``split`` of the model's corpus (its first
        ``limit`` pairs when given); a model not loaded from a directory has no corpus.
        ``workers``: as :meth:`translate`."""
        if self.data is None:
            raise ValueError("this translator was not loaded from a model directory: no corpus")
        check_split(split)
        pairs = getattr(load_corpus(self.data.corpus, **self.data.options), split)[:limit]
        if not pairs:
            raise ValueError(f"the {split} split of {self.data.corpus} is empty")
        beam = self.decode.beam_size if beam_size is None else beam_size
        translations = self.translate(
            [s for s, _ in pairs],
            beam_size=beam,
            batch_size=batch_size,
            progress=progress,
            workers=workers,
        )
        hyps = [t.text for t in translations]
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        return EvaluationReport(
            split,
            corpus_scores(hyps, refs),
            bleu_by_length(sources, hyps, refs),
            list(zip(sources, hyps, refs, strict=True)),
            beam,
            sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs),
        )

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it (``options.examples`` translations shown, 5
        by default) and ``results.json`` records it."""
        options = options or EvaluateOptions()
        report = self.evaluate(
            split,
            limit=limit,
            beam_size=options.beam,
            batch_size=options.batch_size,
            progress=options.progress,
        )
        examples = 5 if options.examples is None else options.examples
        return Report(split, report.lines(examples), report.record(), complete=limit is None)

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add, from the model
        alone: ``neuron`` for a Transformer."""
        return seq2seq_extras(self.model)

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """Translate ``item`` (with ``options.beam``; or read ``options.target`` as its
        translation) and return its cross-attention, then for Transformers the encoder's and
        the decoder's self-attention; with
        ``options.neuron``, a Transformer's query and key vectors on each (an RNN refuses)."""
        options = options or ViewOptions()
        if options.target is not None and options.beam is not None:
            raise ValueError("a target is read, not searched for: pass beam or target, not both")
        translation, forward = self._teacher_forced(item, options.beam, options.target)
        maps, vectors = seq2seq_vectors(self.model, forward) if options.neuron else (forward(), {})
        source, target = translation.source_pieces, translation.target_pieces
        tokens = {"source": source, "target": target, "read": ["<s>", *target[:-1]]}
        views: list[TokenView | ImageView] = [
            TokenView(view_id, title, tokens[rows], tokens[cols], maps[view_id],
                      self_attention=view_id != "cross", vectors=vectors.get(view_id))
            for view_id, title, rows, cols in VIEWS
            if view_id in maps
        ]  # fmt: skip
        given = "" if options.target is None else GIVEN
        output = {"summary": translation.text + given, "text": translation.text}
        return Seen(output, views, subject="the translation")

    def _decode(self, sources: list[list[int]], beam_size: int, attention: bool) -> list[Any]:
        lengths = torch.tensor([len(s) for s in sources])
        src = torch.full((len(sources), int(lengths.max())), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids)] = torch.tensor(ids)
        device = _device_of(self.model)
        src, lengths = src.to(device), lengths.to(device)
        # Each sentence's own limit: its output never depends on the rest of its batch.
        max_len = [self.decode.max_len(len(s)) for s in sources]
        model: Any = lean_step.lean_step_model(
            self.model, self.precision, max_len=max(max_len), need_attention=attention
        )
        with torch.inference_mode():
            if beam_size == 1:
                return greedy_search(model, src, lengths, max_len=max_len)
            nbest = beam_search(
                model,
                src,
                lengths,
                beam_size=beam_size,
                max_len=max_len,
                length_penalty=self.decode.length_penalty,
                patience=self.decode.patience,
            )
        return [hyps[0] for hyps in nbest]

    def _translation(
        self, text: str, source_ids: list[int], hyp: Any, attention: bool
    ) -> Translation:
        tokens = list(hyp.tokens)
        return Translation(
            source=text,
            text=self.target_tokenizer.decode(tokens),
            source_pieces=self.source_tokenizer.pieces(source_ids),
            target_ids=tokens,
            target_pieces=self.target_tokenizer.pieces([*tokens, EOS_ID]),
            attention=(
                hyp.attention[:, : len(source_ids)]
                if attention and hyp.attention is not None
                else None
            ),
        )


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device

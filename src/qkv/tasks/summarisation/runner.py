"""Text in, text out, for the two tasks of :mod:`qkv.tasks.summarisation.task`: a
:class:`Summariser`
writes a summary of a text, a :class:`Replier` the next turn of a dialogue; both decode with
beam search (n-gram block and minimum length from the ``decode:`` section), show what they read
and, for a pointer-generator, which output words were copied and ``p_gen`` at every word.

Scores (:meth:`TextToText.evaluate`) are the field's: ROUGE-1/2/L/Lsum F1 (``rouge-score``),
sacrebleu's BLEU, the share of repeated trigrams in the outputs (See et al. 2017) beside the
references' own, distinct-1/2 (Li et al. 2016), the perplexity of the references under the model
(teacher forced; a pointer-generator's over its extended vocabulary), the mean output length and
the shares of copied and ``<unk>`` output words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from qkv.data import load_corpus
from qkv.data.pairs.summary_words import SummaryVocab, summary_text, summary_tokens
from qkv.data.tokens.special import BOS_ID, UNK_ID
from qkv.decoding import StepModel, beam_search, greedy_search
from qkv.decoding.sizes import check_beam_size, check_int
from qkv.models.registry import build_config, build_model
from qkv.tasks.input_checks import (
    NOTHING_READ,
    LengthLimits,
    check_lengths,
    one_text,
    text_list,
    warn_empty,
    warn_unknown,
)
from qkv.tasks.run_dir import WEIGHTS_FILE, check_split, load_model_run_config
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import GIVEN, EvaluateOptions, Report, ViewOptions
from qkv.tasks.summarisation.config import SummaryDataConfig, SummaryDecodeConfig
from qkv.tasks.summarisation.inputs import TextExample, collate_examples, encode_example, text_loss
from qkv.tasks.summarisation.outputs import Response, TextReport, score_outputs
from qkv.tasks.view_extras import checked_views, seq2seq_extras, seq2seq_vectors
from qkv.training.checkpoint import load_weights

__all__ = ["VOCAB_FILE", "Replier", "Response", "Summariser", "TextReport", "TextToText"]

VOCAB_FILE = "vocab.json"


class TextToText:
    """A trained model with its vocabulary and decoding settings (the base of both runners)."""

    task: ClassVar[str] = ""
    noun: ClassVar[str] = "output"
    takes_target = True  # views(text, ViewOptions(target=...)) reads a given output

    def __init__(
        self,
        model: nn.Module,
        vocab: SummaryVocab,
        decode: SummaryDecodeConfig,
        *,
        data: SummaryDataConfig | None = None,
    ) -> None:
        self.model, self.vocab, self.decode, self.data = model, vocab, decode, data
        self.copying = bool(getattr(model.config, "copy", False))
        self.limits = None if data is None else LengthLimits.without_table(data.max_source_len + 1)

    @classmethod
    def load(cls, model_dir: str | Path) -> TextToText:
        """Load a directory written by :func:`~qkv.tasks.summarisation.train.train_text_to_text`."""
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"no model directory {model_dir}")
        run = load_model_run_config(model_dir)
        if run.task != cls.task:
            raise ValueError(f"{model_dir} holds a {run.task} model, not a {cls.task} model")
        model_config = build_config(run.family, run.model)
        model = build_model(run.family, model_config)
        load_weights(model, model_dir / WEIGHTS_FILE)
        vocab = SummaryVocab.load(model_dir / VOCAB_FILE)
        if len(vocab) != model_config.tgt_vocab_size:
            raise ValueError(
                f"{model_dir / VOCAB_FILE} holds {len(vocab)} words but the model was built "
                f"for {model_config.tgt_vocab_size}"
            )
        decode = run.section("decode", SummaryDecodeConfig)
        return cls(model.eval(), vocab, decode, data=run.section("data", SummaryDataConfig))

    # -- reading and decoding -------------------------------------------------------------------

    def token_count(self, text: str) -> int:
        """The tokens the encoder reads for ``text``, ``</s>`` included."""
        return len(summary_tokens(one_text(text))) + 1

    def _examples(
        self, texts: list[str], *, single: bool, stacklevel: int = 4
    ) -> list[TextExample]:
        """Each text read, after the checks (warnings point at the caller of the public method:
        ``stacklevel`` 4 when that method calls this one)."""
        warn_empty(texts, consequence=NOTHING_READ, single=single, stacklevel=stacklevel)
        examples = [encode_example(text, "", self.vocab) for text in texts]
        if self.limits is not None:
            check_lengths(
                [len(e.src) for e in examples], texts, self.limits,
                advice=f"cut it into parts and {self.task} each",
                consequence=f"the {self.noun} may miss what comes late in them", single=single,
                stacklevel=stacklevel,
            )  # fmt: skip
        warn_unknown(
            [e.src[:-1] for e in examples], texts, UNK_ID,
            consequence="the model cannot read them", single=single, stacklevel=stacklevel,
        )  # fmt: skip
        return examples

    def respond(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> list[Response]:
        """The model's output for each of ``texts`` (a list of str), decoded in batches of
        similar length with the ``decode:`` settings (``beam_size``/``batch_size`` override)."""
        texts = text_list(texts)
        beam, size = self._sizes(beam_size, batch_size)
        examples = self._examples(texts, single=False)
        return self._respond(texts, examples, beam, size, progress)

    def _sizes(self, beam_size: int | None, batch_size: int | None) -> tuple[int, int]:
        """The beam and batch sizes a call asked for, else the ``decode:`` section's; checked
        before any text is read (:mod:`qkv.decoding.sizes`)."""
        beam = self.decode.beam_size if beam_size is None else check_beam_size(beam_size)
        size = self.decode.batch_size if batch_size is None else check_int(batch_size, "batch_size")
        if size < 1:
            raise ValueError(f"batch_size must be >= 1, got {size}")
        return beam, size

    def _respond(self, texts, examples, beam: int, size: int, progress) -> list[Response]:
        order = sorted(range(len(texts)), key=lambda i: len(examples[i].src))
        results: dict[int, Response] = {}
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=self.task, unit="text", dynamic_ncols=True)
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), size):
                rows = order[start : start + size]
                hyps = self._decode([examples[i] for i in rows], beam)
                for i, hyp in zip(rows, hyps, strict=True):
                    results[i] = self._response(
                        texts[i], examples[i], list(hyp.tokens), float(hyp.log_prob), hyp.attention
                    )
                if bar is not None:
                    bar.update(len(rows))
        finally:
            self.model.train(was_training)
            if bar is not None:
                bar.close()
        return [results[i] for i in range(len(texts))]

    def _decode(self, examples: list[TextExample], beam: int) -> list[Any]:
        batch = collate_examples(examples).to(_device(self.model))
        inputs = (batch.src, batch.src_lengths) + ((batch.src_ext,) if self.copying else ())
        d = self.decode
        model = self.model
        assert isinstance(model, StepModel)  # both families (the RNN, the Transformer) step
        with torch.inference_mode():
            if beam == 1:
                return greedy_search(model, *inputs, max_len=d.max_len, min_len=d.min_len,
                                     no_repeat_ngram=d.no_repeat_ngram)  # fmt: skip
            found = beam_search(model, *inputs, beam_size=beam, length_penalty=d.length_penalty,
                                max_len=d.max_len, min_len=d.min_len,
                                no_repeat_ngram=d.no_repeat_ngram)  # fmt: skip
        return [hyps[0] for hyps in found]

    def _response(
        self, text: str, example: TextExample, ids: list[int], log_prob: float,
        attention: Tensor | None,
    ) -> Response:  # fmt: skip
        """The :class:`Response` of output ids ``ids`` (extended ids for copied words)."""
        tokens = self.vocab.tokens(ids, example.oovs)
        return Response(
            source=text,
            source_tokens=self.vocab.tokens(example.ext, example.oovs),
            text=summary_text(tokens),
            tokens=tokens,
            copied=[i >= len(self.vocab) for i in ids],
            log_prob=log_prob,
            attention=attention,
        )

    def details(
        self, text: str, *, beam_size: int | None = None
    ) -> tuple[Response, dict[str, list[Tensor]], Tensor | None]:
        """:meth:`respond` for one text, then the model run on its own output (teacher
        forcing): every attention by kind (``(H, Tq, Tk)`` per layer) with the copy attention
        as ``"copy"`` ``[(1, T + 1, S)]``, and ``p_gen`` ``(T + 1,)`` (``None`` unless the model
        copies)."""
        response, forward = self._teacher_forced(text, beam_size)
        maps, p_gen = forward()
        return response, maps, p_gen

    def _teacher_forced(
        self, text: str, beam_size: int | None, target: str | None = None
    ) -> tuple[Response, Callable[[], tuple[dict[str, list[Tensor]], Tensor | None]]]:
        """:meth:`respond` for one text (or ``target`` taken as its output: no decoding), and
        the teacher-forced pass of :meth:`details`, not yet run (the neuron view records that
        pass alone, not the decoding)."""
        text = one_text(text, several="respond(texts)")
        beam, _ = self._sizes(beam_size, None)
        (example,) = self._examples([text], single=True, stacklevel=5)  # through this method
        if target is None:
            (response,) = self._respond([text], [example], beam, 1, False)
        else:
            response = self._given(text, example, target)
        batch = collate_examples([example]).to(_device(self.model))
        ids = self.vocab.target_ids(response.tokens, example.oovs)
        tgt_in = torch.tensor([[BOS_ID, *ids]], device=batch.src.device)
        extra = {"src_ext": batch.src_ext} if self.copying else {}

        def forward() -> tuple[dict[str, list[Tensor]], Tensor | None]:
            with torch.inference_mode():
                out = self.model.eval()(batch.src, batch.src_lengths, tgt_in, need_weights=True,
                                        **extra)  # fmt: skip
            maps = {kind: [layer[0] for layer in layers] for kind, layers in out.attentions.items()
                    if layers}  # fmt: skip
            if out.copy is None:
                return maps, None
            maps["copy"] = [out.copy.weights[0][None]]  # (1, T + 1, S)
            return maps, out.copy.p_gen[0]  # p_gen (T + 1,)

        return response, forward

    def _given(self, text: str, example: TextExample, target: str) -> Response:
        """``target`` as the output for ``text`` (read as the model reads its own: a word it
        does not know is ``<unk>`` unless the source has it to copy); ``log_prob`` is NaN, as
        no search scored it."""
        ids = encode_example(text, target, self.vocab).tgt_ext
        if len(ids) > self.decode.max_len:
            raise ValueError(
                f"target has {len(ids)} words; this {self.noun} model writes at most "
                f"{self.decode.max_len} (decode.max_len): give a shorter target"
            )
        return self._response(text, example, ids, float("nan"), None)

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add, from the model
        alone: ``neuron`` for a Transformer."""
        return seq2seq_extras(self.model)

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The output for ``item`` and its attention: the copy attention first (its rows
        labelled with ``p_gen``, copied words marked), then the decoder's cross-attention and,
        for a Transformer, the encoder's and decoder's self-attention; with ``options.neuron``,
        a Transformer's query and key vectors on its own attentions (an RNN refuses)."""
        options = options or ViewOptions()
        if options.target is not None and options.beam is not None:
            raise ValueError("a target is read, not searched for: pass beam or target, not both")
        response, forward = self._teacher_forced(item, options.beam, options.target)
        (maps, p_gen), vectors = (
            seq2seq_vectors(self.model, forward) if options.neuron else (forward(), {})
        )
        written = [*response.tokens, "</s>"]
        rows = list(written)
        if p_gen is not None:
            marks = [*response.copied, False]
            rows = [f"{w}{' [copied]' if c else ''} (p_gen {float(p):.2f})"
                    for w, c, p in zip(written, marks, p_gen, strict=True)]  # fmt: skip
        read = ["<s>", *response.tokens]
        titles = (("copy", "copy attention (rows: p_gen)", rows, response.source_tokens, False),
                  ("cross", "cross-attention", rows, response.source_tokens, False),
                  ("encoder", "encoder self-attention", response.source_tokens,
                   response.source_tokens, True),
                  ("decoder", "decoder self-attention", written, read, True))  # fmt: skip
        views: list[TokenView | ImageView] = [
            TokenView(kind, title, q, k, maps[kind], self_attention=own,
                      vectors=vectors.get(kind))
            for kind, title, q, k, own in titles if kind in maps
        ]  # fmt: skip
        output = {
            "summary": response.text + ("" if options.target is None else GIVEN),
            "text": response.text,
            "tokens": response.tokens,
            "copied": response.copied,
            "p_gen": None if p_gen is None else [round(float(p), 4) for p in p_gen],
        }
        return Seen(output, views, subject=f"the {self.noun}")

    # -- scores ---------------------------------------------------------------------------------

    def perplexity(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> float:
        """``exp`` of the mean negative log-likelihood per reference token (``</s>``
        included), teacher forced; sources are read whole."""
        total, tokens = self.log_loss(pairs, batch_size)
        return math.exp(total / max(tokens, 1))

    def log_loss(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> tuple[float, int]:
        """The summed negative log-likelihood (nats) of the references of ``pairs`` and how
        many tokens it sums over (``</s>`` included): what :meth:`perplexity` divides."""
        loss_fn = text_loss(self.copying, 0.0)
        total, tokens = 0.0, 0
        examples = [encode_example(s, t, self.vocab) for s, t in pairs]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(examples), batch_size):
                    batch = collate_examples(examples[start : start + batch_size])
                    loss, count = loss_fn(self.model, batch.to(_device(self.model)))
                    total, tokens = total + float(loss), tokens + int(count)
        finally:
            self.model.train(was_training)
        return total, tokens

    def evaluate(
        self,
        split: str = "test",
        *,
        limit: int | None = None,
        beam_size: int | None = None,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> TextReport:
        """Every score of the module docstring on ``split`` of the model's corpus (its first
        ``limit`` pairs when given)."""
        if self.data is None:
            raise ValueError(f"this {self.task} model was not loaded from a directory: no corpus")
        check_split(split)
        pairs = load_corpus(self.data.corpus, **self.data.options).split(split)[:limit]
        if not pairs:
            raise ValueError(f"the {split} split of {self.data.corpus} is empty")
        responses = self.respond([s for s, _ in pairs], beam_size=beam_size,
                                 batch_size=batch_size, progress=progress)  # fmt: skip
        return score_outputs(
            split, pairs, responses,
            beam=self.decode.beam_size if beam_size is None else beam_size,
            perplexity=self.perplexity(pairs), noun=self.noun,
        )  # fmt: skip

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        options = options or EvaluateOptions()
        report = self.evaluate(
            split, limit=limit, beam_size=options.beam, batch_size=options.batch_size,
            progress=options.progress,
        )  # fmt: skip
        examples = 3 if options.examples is None else options.examples
        return Report(split, report.lines(examples), report.record(), complete=limit is None)


class Summariser(TextToText):
    """Summaries of texts (or of code): ``qkv summarize``."""

    task = "summarisation"
    noun = "summary"

    def summarize(self, texts: Sequence[str], **options: Any) -> list[Response]:
        return self.respond(texts, **options)


class Replier(TextToText):
    """The next turn of a dialogue (the previous turns joined by ``<turn>``): ``qkv reply``."""

    task = "dialogue"
    noun = "reply"

    def reply(self, contexts: Sequence[str], **options: Any) -> list[Response]:
        return self.respond(contexts, **options)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device

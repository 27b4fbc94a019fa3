"""The tagging runner: a trained tagger directory loaded as a :class:`Tagger` (tag, evaluate,
report, views)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import Tensor

from qkv.data.labelled.tagged import TaggingCorpus, load_tagging_corpus
from qkv.data.labelled.word_split import word_splitter
from qkv.evaluation.classification import token_accuracy
from qkv.layers.crf import TransitionRules
from qkv.models.tagger import SequenceTagger
from qkv.tasks.encoder_run import EncoderModel, load_encoder_dir
from qkv.tasks.input_checks import one_text, sentence_list, text_list, warn_long, warn_unknown
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import check_split
from qkv.tasks.sections import PredictConfig, TaggerDataConfig
from qkv.tasks.seen import Seen
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.tagging.config import TaggingDataConfig
from qkv.tasks.tagging.inputs import (
    TaggingExample,
    collate_tagging,
    decode_tags,
    encode_sentences,
    stitch_sentences,
    tagging_overlap,
    token_shapes,
    word_scores,
)
from qkv.tasks.tagging.output import ENTITY_FORMATS, TAG_FORMATS, check_format, render_tagged
from qkv.tasks.view_extras import checked_views, encoder_extras, encoder_token_views


@dataclass(frozen=True)
class TaggingEvaluation:
    """Token accuracy on one split; ``unseen_accuracy`` over words absent from the training
    split (``None`` when every word was seen or the training split is unknown)."""

    split: str
    sentences: int
    words: int
    accuracy: float
    unseen_words: int
    unseen_accuracy: float | None

    def lines(self) -> list[str]:
        """What ``qkv evaluate`` prints."""
        lines = [
            f"{self.split}: {self.sentences:,} sentences, {self.words:,} words",
            f"token accuracy {self.accuracy:.4f}",
        ]
        if self.unseen_accuracy is not None:
            lines.append(
                f"on the {self.unseen_words:,} words unseen in training: {self.unseen_accuracy:.4f}"
            )
        return lines


UNKNOWN = "the model cannot read them, so their tags mean little"


class Tagger:
    """A trained tagger with its vocabulary and tags.

    Raw text is split into words as the training corpus was (``data.splitter``, saved with the
    run). A sentence longer than the ``data.max_len`` ids the model was trained on is tagged in
    overlapping windows of whole words, each word by the window that holds the most of its
    context (:func:`~qkv.tasks.tagging.inputs.stitch_sentences`; entity tags stay valid BIO),
    with an :class:`~qkv.tasks.input_checks.InputWarning`; sentences made mostly of unknown
    tokens warn too. A sentence of one window is tagged as that window decodes it.
    """

    task = "tagging"  # the task a model directory must hold
    entity_tags = False  # BIO entity tags: spans to print, entities to show

    def __init__(self, encoder: EncoderModel, config: RunConfig) -> None:
        model = encoder.model
        assert isinstance(model, SequenceTagger)  # the one family of tagging and ner
        self.model, self.inputs, self.config = model.eval(), encoder.inputs, config
        self.tags: tuple[str, ...] = encoder.labels
        self.casing = self.model.config.casing_dim > 0
        self.rules = self.decoding_rules(self.tags)
        # How raw text is split into words: as the training corpus was (data.splitter).
        self.splitter = config.section("data", TaggerDataConfig).splitter
        self.split_words = word_splitter(self.splitter)

    def decoding_rules(self, tags: Sequence[str]) -> TransitionRules | None:
        """The constraints on decoded tag sequences: none for part-of-speech tags."""
        return None

    @classmethod
    def load(cls, model_dir: str | Path) -> Tagger:
        encoder, config = load_encoder_dir(model_dir, task=cls.task)
        return cls(encoder, config)

    def tag_words(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """The tag of every word of every (pre-split) sentence: ``sentences`` is a list of
        lists of words (a str in either place is a ``TypeError``; :meth:`tag` takes raw
        text)."""
        sentences = sentence_list(sentences)
        return self._tag(sentences, [" ".join(words) for words in sentences])

    def _tag(self, sentences: list[list[str]], texts: list[str]) -> list[list[str]]:
        """Tags of ``sentences``; warnings name each by its text in ``texts``."""
        empty = [i for i, words in enumerate(sentences) if not words]
        if empty:
            raise ValueError(f"text #{empty[0]} ({texts[empty[0]]!r}) has no words to tag")
        examples, spans = encode_sentences(
            self.inputs, sentences, None, casing=self.casing, overlap=tagging_overlap(self.inputs)
        )
        windows = [0] * len(sentences)
        for sentence, _, _ in spans:
            windows[sentence] += 1
        warn_long(
            [i for i, count in enumerate(windows) if count > 1],
            texts,
            self.inputs.max_len,
            unit="ids",
            consequence="tagged in overlapping windows of whole words, each word by the window "
            "that holds the most of its context",
            stacklevel=4,
        )
        inner: list[list[int]] = [[] for _ in sentences]  # each word's ids once
        counted = [0] * len(sentences)  # the words whose ids are in inner
        for example, (sentence, start, end) in zip(examples, spans, strict=True):
            shared = counted[sentence] - start  # words the window before gave already
            inner[sentence].extend(example.ids[example.first[shared] : -1])  # no specials
            counted[sentence] = end
        warn_unknown(inner, texts, self.inputs.unk_id, consequence=UNKNOWN, stacklevel=4)
        paths: list[list[int]] = [[] for _ in examples]
        size = self.config.section("decode", PredictConfig).batch_size
        with torch.inference_mode():
            for batch_indices in _chunks(examples, size):
                batch = collate_tagging([examples[i] for i in batch_indices], self.inputs.pad_id)
                scores = word_scores(self.model, batch)  # (B, W, K)
                decoded = decode_tags(self.model, scores, batch.words, self.rules)
                for i, path in zip(batch_indices, decoded, strict=True):
                    paths[i] = path
        lengths = [len(words) for words in sentences]
        ids = stitch_sentences(lengths, examples, spans, paths, self.rules)
        return [[self.tags[t] for t in row] for row in ids]

    def tag(self, texts: Sequence[str]) -> list[list[tuple[str, str]]]:
        """Split each raw text of ``texts`` (a list of str: a bare str is a ``TypeError``, as
        it would be read as its characters) into words and punctuation as the training corpus
        was (``data.splitter``: :mod:`qkv.data.labelled.word_split`), and tag them."""
        texts = text_list(texts)
        sentences = [self.split_words(text) for text in texts]
        return [
            list(zip(words, tags, strict=True))
            for words, tags in zip(sentences, self._tag(sentences, texts), strict=True)
        ]

    def render(self, texts: Sequence[str], format: str | None = None) -> list[str]:
        """What ``qkv tag`` prints for ``texts`` in ``format`` (:mod:`qkv.tasks.tagging.output`;
        ``None``: the tagger's first format, ``spans`` for entities, else ``words``)."""
        texts = text_list(texts)
        format = format or (ENTITY_FORMATS if self.entity_tags else TAG_FORMATS)[0]
        check_format(format, entity_tags=self.entity_tags)
        return render_tagged(texts, self.tag(texts), format, entity_tags=self.entity_tags)

    def token_count(self, text: str) -> int:
        """The ids :meth:`attention` reads for ``text`` (its first window), by the tokenizer
        alone."""
        words = self.split_words(one_text(text))
        if not words:
            raise ValueError("the text has no words to tag")
        _, end = self.inputs.word_windows(words)[0]
        return len(self.inputs.encode_words(words[:end])[0])

    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """The tokens of ``text`` and each layer's self-attention ``(H, T, T)``; of a text
        longer than one window, the first window's (with a warning)."""
        text = one_text(text, several="tag(texts)")
        words = self.split_words(text)
        spans = self.inputs.word_windows(words)
        warn_long(
            [0] if len(spans) > 1 else [],
            [text],
            self.inputs.max_len,
            unit="ids",
            consequence=f"the attention shown is that of its first {spans[0][1]} of "
            f"{len(words)} words",
            single=True,
        )
        ids, first = self.inputs.encode_words(words[: spans[0][1]])
        shapes = None
        if self.casing:
            shapes = torch.tensor([token_shapes(words[: spans[0][1]], first, len(ids))])
        with torch.inference_mode():
            out = self.model(torch.tensor([ids]), shapes=shapes, need_weights=True)
        tokens = [self.inputs.tokenizer.id_to_token(i) for i in ids]
        return tokens, [w[0] for w in out.attentions or []]

    def evaluate(
        self,
        split: str = "test",
        corpus: TaggingCorpus | None = None,
        *,
        limit: int | None = None,
    ) -> TaggingEvaluation:
        """Token accuracy on ``split`` of the model's corpus (its first ``limit`` sentences
        when given), overall and on words unseen in training."""
        check_split(split)
        data = self.config.section("data", TaggingDataConfig)
        corpus = corpus or load_tagging_corpus(data.corpus, **data.options)
        sentences = getattr(corpus, split)[:limit]
        if not sentences:
            raise ValueError(f"the {split} split is empty")
        predicted = self.tag_words([s.words for s in sentences])
        gold = [list(s.tags) for s in sentences]
        seen = {w for s in corpus.train for w in s.words}
        unseen = [
            (g, p)
            for s, gs, ps in zip(sentences, gold, predicted, strict=True)
            for w, g, p in zip(s.words, gs, ps, strict=True)
            if w not in seen
        ]
        return TaggingEvaluation(
            split,
            len(sentences),
            sum(len(g) for g in gold),
            token_accuracy(gold, predicted),
            len(unseen),
            sum(g == p for g, p in unseen) / len(unseen) if unseen else None,
        )

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        result = self.evaluate(split, limit=limit)
        record = {k: v for k, v in asdict(result).items() if k != "split"}
        return Report(split, result.lines(), record, complete=limit is None)

    def token_words(self, text: str) -> list[int | None]:
        """The word of ``text`` each token of :meth:`attention` belongs to (its index into the
        text's words), ``None`` for the special tokens around them."""
        words = self.split_words(one_text(text))
        end = self.inputs.word_windows(words)[0][1] if words else 0
        ids, first = self.inputs.encode_words(words[:end])
        owners: list[int | None] = [None] * len(ids)
        for word, (begin, stop) in enumerate(zip(first, [*first[1:], len(ids) - 1], strict=True)):
            owners[begin:stop] = [word] * (stop - begin)
        return owners

    def word_marks(self, tags: Sequence[str]) -> list[str]:
        """Each word's mark on the attention views: its part-of-speech tag."""
        return list(tags)

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add, from the model
        alone (:func:`~qkv.tasks.view_extras.encoder_extras`)."""
        return encoder_extras(self.model, self.model.config.attends)

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The tags of ``item`` and the encoder's self-attention over it, each token marked
        with its word's mark (:meth:`word_marks`; ``""`` for the special tokens)."""
        views = encoder_token_views(
            self.model, lambda: self.attention(item), options or ViewOptions()
        )
        tagged = self.tag([item])[0]
        output = {
            "summary": " ".join(f"{word}/{tag}" for word, tag in tagged),
            "tags": [[word, tag] for word, tag in tagged],
        }
        marks = self.word_marks([tag for _, tag in tagged])
        tokens = ["" if w is None else marks[w] for w in self.token_words(item)]
        return Seen(output, [replace(view, marks=tokens) for view in views])


def _chunks(examples: Sequence[TaggingExample], size: int) -> Iterator[list[int]]:
    """Indices of batches of at most ``size`` examples, grouped by length."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].ids))
    for begin in range(0, len(order), size):
        yield order[begin : begin + size]

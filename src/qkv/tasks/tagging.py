"""Sequence tagging end to end (part-of-speech tags): train a tagger on word/tag sentences,
tag new text, and score it (token accuracy, also on words unseen in training).

Tags belong to words, the model reads subwords: each word's tag is predicted at its first
subword and the other positions carry no label (:mod:`qkv.tasks.encoder_inputs`). Sentences
longer than the model's ``max_len`` are tagged in windows of whole words. A model directory
holds what a classifier's does (:mod:`qkv.tasks.encoder_run`), with the tags in
``labels.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.batching import plan_by_cost
from qkv.data.tagged import TaggedSentence, TaggingCorpus, load_tagging_corpus
from qkv.evaluation.classification import token_accuracy
from qkv.tasks.encoder_inputs import IGNORE, EncoderBatch, TextInputs, collate, split_words
from qkv.tasks.encoder_run import EncoderModel, load_encoder_dir, prepare_encoder, real_tokens
from qkv.tasks.input_checks import one_text, sentence_list, text_list, warn_long, warn_unknown
from qkv.tasks.protocol import EvaluateOptions, Report, Seen, TaskSpec, ViewOptions, encoder_views
from qkv.tasks.run_config import PredictConfig, RunConfig, TaggingDataConfig
from qkv.tasks.run_dir import check_split
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaggingExample:
    """One window of a sentence: ``ids`` with specials, ``first`` subword position of each
    word, and the word's tag id (``None`` when tagging new text)."""

    ids: list[int]
    first: list[int]
    tags: list[int] | None


def encode_sentences(
    inputs: TextInputs, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[int]] | None
) -> tuple[list[TaggingExample], list[tuple[int, int, int]]]:
    """Windows of every sentence, and for each window ``(sentence, start word, end word)``."""
    examples, spans = [], []
    for index, words in enumerate(sentences):
        for start, end in inputs.word_windows(words):
            ids, first = inputs.encode_words(words[start:end])
            window_tags = None if tags is None else list(tags[index][start:end])
            examples.append(TaggingExample(ids, first, window_tags))
            spans.append((index, start, end))
    return examples, spans


def _labels(examples: Sequence[TaggingExample], length: int) -> Tensor:
    """``(B, T)`` tag ids at each word's first subword, ``IGNORE`` elsewhere."""
    labels = torch.full((len(examples), length), IGNORE, dtype=torch.long)
    for row, ex in enumerate(examples):
        labels[row, ex.first] = torch.tensor(ex.tags, dtype=torch.long)
    return labels


def tagging_batches(
    examples: Sequence[TaggingExample],
    pad_id: int,
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[tuple[list[int], EncoderBatch]]:
    """Length-grouped batches (indices into ``examples`` and the batch)."""
    plan = plan_by_cost(
        np.array([len(ex.ids) for ex in examples]),
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
    )
    for indices in plan[start:]:
        chosen = [examples[i] for i in indices]
        batch = collate([ex.ids for ex in chosen], pad_id)
        labels = _labels(chosen, batch.ids.size(1)) if chosen[0].tags is not None else None
        yield indices, EncoderBatch(batch.ids, batch.keep, labels)


def tagging_loss(label_smoothing: float = 0.0):
    """``(model, batch) -> (summed loss, tagged words)``."""

    def loss_fn(model: nn.Module, batch: EncoderBatch) -> tuple[Tensor, Tensor]:
        logits = model(batch.ids, keep=batch.keep).logits  # (B, T, K)
        loss = F.cross_entropy(
            logits.float().flatten(0, 1),
            batch.labels.flatten(),
            ignore_index=IGNORE,
            reduction="sum",
            label_smoothing=label_smoothing,
        )
        return loss, (batch.labels != IGNORE).sum()

    return loss_fn


def _tag_ids(
    sentences: Sequence[TaggedSentence], index: dict[str, int], split: str
) -> list[list[int]]:
    unknown = sorted({t for s in sentences for t in s.tags} - set(index))
    if unknown:
        raise ValueError(f"the {split} split has tags the training split lacks: {unknown}")
    return [[index[t] for t in s.tags] for s in sentences]


def train_tagger(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> Trained:
    """Train ``config``'s tagger; the best weights (by validation token accuracy) go to
    ``config.out_dir``. Arguments as :func:`qkv.tasks.translation.train_translation`."""
    run = TrainingRun(config, task="tagging", resume=resume, overwrite=overwrite,
                      distributed=distributed, progress=progress,
                      handle_signals=handle_signals)  # fmt: skip
    data = config.section("data", TaggingDataConfig)
    corpus = load_tagging_corpus(data.corpus, **data.options)
    encoder = prepare_encoder(
        run,
        labels=corpus.tags,
        label_key="num_tags",
        bpe_text=[" ".join(s.words) for s in corpus.train],
    )
    index = {tag: i for i, tag in enumerate(corpus.tags)}
    train_examples, _ = encode_sentences(
        encoder.inputs, [s.words for s in corpus.train], _tag_ids(corpus.train, index, "train")
    )
    valid_examples, _ = encode_sentences(
        encoder.inputs, [s.words for s in corpus.valid], _tag_ids(corpus.valid, index, "valid")
    )
    model, pad_id = encoder.model, encoder.inputs.pad_id

    def evaluate() -> dict[str, float]:
        right = total = 0
        device = next(model.parameters()).device
        for _, batch in tagging_batches(
            valid_examples, pad_id, max_tokens=config.train.batch_tokens, shuffle=False
        ):
            batch = batch.to(device)
            predicted = model(batch.ids, keep=batch.keep).logits.argmax(-1)
            real = batch.labels != IGNORE
            right += int((predicted[real] == batch.labels[real]).sum())
            total += int(real.sum())
        return {"valid_accuracy": right / max(total, 1)}

    return run.train(
        model,
        loss_fn=tagging_loss(config.train.label_smoothing),
        batches=lambda epoch, start: (
            batch
            for _, batch in tagging_batches(
                train_examples,
                pad_id,
                max_tokens=config.train.batch_tokens,
                shuffle=True,
                seed=config.train.seed,
                epoch=epoch,
                start=start,
            )
        ),
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        count_tokens=real_tokens,
    )


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

    A sentence longer than the ``data.max_len`` ids the model was trained on is tagged in
    windows of whole words, each read without the others, with an
    :class:`~qkv.tasks.input_checks.InputWarning`; sentences made mostly of unknown tokens
    warn too.
    """

    def __init__(self, encoder: EncoderModel, config: RunConfig) -> None:
        self.model, self.inputs, self.config = encoder.model.eval(), encoder.inputs, config
        self.tags: tuple[str, ...] = encoder.labels

    @classmethod
    def load(cls, model_dir: str | Path) -> Tagger:
        encoder, config = load_encoder_dir(model_dir, task="tagging")
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
        examples, spans = encode_sentences(self.inputs, sentences, None)
        windows = [0] * len(sentences)
        for sentence, _, _ in spans:
            windows[sentence] += 1
        warn_long(
            [i for i, count in enumerate(windows) if count > 1],
            texts,
            self.inputs.max_len,
            unit="ids",
            consequence="tagged in windows of whole words, each read without the others",
            stacklevel=4,
        )
        inner: list[list[int]] = [[] for _ in sentences]
        for example, (sentence, _, _) in zip(examples, spans, strict=True):
            inner[sentence].extend(example.ids[1:-1])  # without [CLS] and [SEP]
        warn_unknown(inner, texts, self.inputs.unk_id, consequence=UNKNOWN, stacklevel=4)
        tags: list[list[str]] = [[""] * len(words) for words in sentences]
        size = self.config.section("decode", PredictConfig).batch_size
        with torch.inference_mode():
            for batch_indices in _chunks(examples, size):
                batch = collate([examples[i].ids for i in batch_indices], self.inputs.pad_id)
                predicted = self.model(batch.ids, keep=batch.keep).logits.argmax(-1)  # (B, T)
                for row, i in enumerate(batch_indices):
                    sentence, start, _ = spans[i]
                    for offset, position in enumerate(examples[i].first):
                        tags[sentence][start + offset] = self.tags[int(predicted[row, position])]
        return tags

    def tag(self, texts: Sequence[str]) -> list[list[tuple[str, str]]]:
        """Split each raw text of ``texts`` (a list of str: a bare str is a ``TypeError``, as
        it would be read as its characters) into words and punctuation, and tag them."""
        texts = text_list(texts)
        sentences = [split_words(text) for text in texts]
        return [
            list(zip(words, tags, strict=True))
            for words, tags in zip(sentences, self._tag(sentences, texts), strict=True)
        ]

    def token_count(self, text: str) -> int:
        """The ids :meth:`attention` reads for ``text`` (its first window), by the tokenizer
        alone."""
        words = split_words(one_text(text))
        if not words:
            raise ValueError("the text has no words to tag")
        _, end = self.inputs.word_windows(words)[0]
        return len(self.inputs.encode_words(words[:end])[0])

    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """The tokens of ``text`` and each layer's self-attention ``(H, T, T)``; of a text
        longer than one window, the first window's (with a warning)."""
        text = one_text(text, several="tag(texts)")
        words = split_words(text)
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
        ids, _ = self.inputs.encode_words(words[: spans[0][1]])
        with torch.inference_mode():
            out = self.model(torch.tensor([ids]), need_weights=True)
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

    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The tags of ``item`` and the encoder's self-attention over it."""
        views = encoder_views(*self.attention(item))
        tagged = self.tag([item])[0]
        output = {
            "summary": " ".join(f"{word}/{tag}" for word, tag in tagged),
            "tags": [[word, tag] for word, tag in tagged],
        }
        return Seen(output, list(views))


def _chunks(examples: Sequence[TaggingExample], size: int) -> Iterator[list[int]]:
    """Indices of batches of at most ``size`` examples, grouped by length."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].ids))
    for begin in range(0, len(order), size):
        yield order[begin : begin + size]


TASK = TaskSpec(
    name="tagging",
    label="tagger",
    input="text",
    families=("sequence_tagger",),
    sections={"data": TaggingDataConfig, "train": TrainConfig, "decode": PredictConfig},
    train=train_tagger,
    load=Tagger.load,
    model_keys=frozenset({"preset", "pretrained"}),
    view_options=frozenset({"layer", "heads"}),
)

"""A tagger's data path: words to batches, the model's word scores, the loss and the decoding.

Tags belong to words, the model reads subwords: each word's tag is scored at its first subword
(as BERT taggers do). :func:`word_scores` gathers those positions into word-level scores
``(B, W, K)``, and everything after it works on words: the softmax loss or the CRF's negative
log-likelihood (:mod:`qkv.layers.crf`), and the decoding, which is constrained to valid BIO
sequences when the tags are entity tags (:func:`qkv.layers.crf.bio_transitions`): a CRF's
Viterbi path, or for a softmax output the most probable valid sequence of its per-word
probabilities. Part-of-speech tags take the plain argmax (or the CRF's unconstrained path).
Shared by the part-of-speech task (:mod:`qkv.tasks.tagging.task`) and the entity task
(:mod:`qkv.tasks.ner.task`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.labelled.word_shape import word_shape
from qkv.data.pairs.batching import plan_by_cost
from qkv.layers.crf import LinearChainCRF, TransitionRules, constrained_decode
from qkv.tasks.encoder_inputs import TextInputs, collate
from qkv.tasks.windows import stitch_labels, word_contexts

__all__ = [
    "TaggingBatch",
    "TaggingExample",
    "collate_tagging",
    "decode_tags",
    "encode_sentences",
    "stitch_sentences",
    "tagging_batches",
    "tagging_loss",
    "tagging_overlap",
    "word_scores",
]


@dataclass(frozen=True)
class TaggingExample:
    """One window of a sentence: ``ids`` with specials, ``first`` subword position of each
    word, the word's tag id (``None`` when tagging new text) and, for a model with the casing
    feature, the word shape of every id (0 at the specials)."""

    ids: list[int]
    first: list[int]
    tags: list[int] | None
    shapes: list[int] | None = None


def token_shapes(words: Sequence[str], first: Sequence[int], length: int) -> list[int]:
    """The shape of each of ``length`` ids: its word's at every subword of the word, 0 at the
    specials (the first id and the last)."""
    shapes = [0] * length
    ends = [*first[1:], length - 1]
    for word, begin, end in zip(words, first, ends, strict=True):
        shapes[begin:end] = [word_shape(word)] * (end - begin)
    return shapes


def encode_sentences(
    inputs: TextInputs,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[int]] | None,
    *,
    casing: bool = False,
    overlap: int = 0,
) -> tuple[list[TaggingExample], list[tuple[int, int, int]]]:
    """Windows of every sentence (with word shapes when ``casing``), in order, and for each
    window ``(sentence, start word, end word)``; neighbouring windows of a long sentence share
    up to ``overlap`` subwords (0 to train, where each word is learnt once;
    :func:`tagging_overlap` to tag, stitched by :func:`stitch_sentences`)."""
    examples, spans = [], []
    for index, words in enumerate(sentences):
        for start, end in inputs.word_windows(words, overlap):
            ids, first = inputs.encode_words(words[start:end])
            window_tags = None if tags is None else list(tags[index][start:end])
            shapes = token_shapes(words[start:end], first, len(ids)) if casing else None
            examples.append(TaggingExample(ids, first, window_tags, shapes))
            spans.append((index, start, end))
    return examples, spans


def tagging_overlap(inputs: TextInputs) -> int:
    """The subwords two neighbouring windows of a long sentence share when it is tagged: half a
    window, so a word at the cut between two windows' runs sits about a quarter of a window
    from the edges of the one that decides it, and any entity of up to half a window lies
    whole in some window (:mod:`qkv.tasks.windows`)."""
    return (inputs.max_len - 2) // 2


def _word_sizes(example: TaggingExample) -> list[int]:
    """The subwords of each word of ``example`` (``ids`` end with ``[SEP]``)."""
    ends = [*example.first[1:], len(example.ids) - 1]
    return [end - begin for begin, end in zip(example.first, ends, strict=True)]


def stitch_sentences(
    lengths: Sequence[int],
    examples: Sequence[TaggingExample],
    spans: Sequence[tuple[int, int, int]],
    paths: Sequence[Sequence[int]],
    rules: TransitionRules | None,
) -> list[list[int]]:
    """The tag ids of each sentence (``lengths``: its words) from ``paths``, the decoded tag ids
    of each window of :func:`encode_sentences` (``examples`` and their ``spans``): a sentence of
    one window takes its path; a longer one takes each word from the window where it has the
    most context, cuts moved where ``rules`` forbid them
    (:func:`~qkv.tasks.windows.stitch_labels`, whose doc says why BIO stays valid)."""
    windows: list[list[int]] = [[] for _ in lengths]
    for i, (sentence, _, _) in enumerate(spans):
        windows[sentence].append(i)
    allowed = None if rules is None else (lambda a, b: bool(rules.allowed[a, b]))
    tags = []
    for length, indices in zip(lengths, windows, strict=True):
        ranges = [(spans[i][1], spans[i][2]) for i in indices]
        contexts = [word_contexts(_word_sizes(examples[i]), ranges[k], length)
                    for k, i in enumerate(indices)]  # fmt: skip
        tags.append(stitch_labels(ranges, [paths[i] for i in indices], contexts, allowed))
    return tags


@dataclass(frozen=True)
class TaggingBatch:
    """Padded windows.

    Attributes:
        ids: ``(B, T)``; keep: ``(B, T)`` True at real ids.
        first: ``(B, W)`` the position of each word's first subword (0 at padding);
            words: ``(B, W)`` True at real words.
        tags: ``(B, W)`` gold tag ids (0 at padding), ``None`` when tagging new text.
        shapes: ``(B, T)`` word-shape ids, for a model with the casing feature.
    """

    ids: Tensor
    keep: Tensor
    first: Tensor
    words: Tensor
    tags: Tensor | None = None
    shapes: Tensor | None = None

    def to(self, device: torch.device | str) -> TaggingBatch:
        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device)

        return TaggingBatch(
            self.ids.to(device), self.keep.to(device), self.first.to(device),
            self.words.to(device), move(self.tags), move(self.shapes),
        )  # fmt: skip


def collate_tagging(examples: Sequence[TaggingExample], pad_id: int) -> TaggingBatch:
    """``examples`` right-padded into one :class:`TaggingBatch` (ids and word positions by
    :func:`~qkv.tasks.encoder_inputs.collate`, the other rows padded with 0)."""
    tokens = collate([ex.ids for ex in examples], pad_id)
    words = collate([ex.first for ex in examples], 0)  # first (B, W), words (B, W)
    tags = None
    if examples[0].tags is not None:
        tags = collate([_given(ex.tags) for ex in examples], 0).ids
    shapes = None
    if examples[0].shapes is not None:
        shapes = collate([_given(ex.shapes) for ex in examples], 0).ids  # (B, T)
    return TaggingBatch(tokens.ids, tokens.keep, words.ids, words.keep, tags, shapes)


def _given(row: list[int] | None) -> list[int]:
    """The tags or shapes of an example in a batch whose first example has them: the examples
    of one batch are alike."""
    if row is None:
        raise ValueError("a batch mixes examples with and without tags (or word shapes)")
    return row


def tagging_batches(
    examples: Sequence[TaggingExample],
    pad_id: int,
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[tuple[list[int], TaggingBatch]]:
    """Length-grouped batches (indices into ``examples`` and the batch)."""
    plan = plan_by_cost(
        np.array([len(ex.ids) for ex in examples]),
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
    )
    for indices in plan[start:]:
        yield indices, collate_tagging([examples[i] for i in indices], pad_id)


def word_scores(model: nn.Module, batch: TaggingBatch) -> Tensor:
    """``(B, W, K)``: the model's tag scores at each word's first subword."""
    logits = model(batch.ids, keep=batch.keep, shapes=batch.shapes).logits  # (B, T, K)
    index = batch.first.unsqueeze(-1).expand(-1, -1, logits.size(-1))  # (B, W, K)
    return logits.gather(1, index)


def _crf(model: nn.Module) -> LinearChainCRF | None:
    """The tagger's CRF (``None``: a softmax output); ``model`` is a
    :class:`~qkv.models.tagger.SequenceTagger`, or one inside ``torch.compile``'s wrapper, which
    passes attribute reads through."""
    crf = model.crf
    assert crf is None or isinstance(crf, LinearChainCRF)  # SequenceTagger.crf
    return crf


def tagging_loss(label_smoothing: float = 0.0):
    """``(model, batch) -> (summed loss, tagged words)``: the summed cross-entropy of the
    words' tags, or with a CRF the summed negative log-likelihood of the sentences' tag
    sequences (label smoothing applies to the softmax only)."""

    def loss_fn(model: nn.Module, batch: TaggingBatch) -> tuple[Tensor, Tensor]:
        assert batch.tags is not None, "a training batch carries its tags"
        scores = word_scores(model, batch).float()  # (B, W, K)
        crf = _crf(model)
        if crf is not None:
            loss = crf.nll(scores, batch.tags, batch.words).sum()
        else:
            loss = F.cross_entropy(
                scores[batch.words], batch.tags[batch.words],
                reduction="sum", label_smoothing=label_smoothing,
            )  # fmt: skip
        return loss, batch.words.sum()

    return loss_fn


def decode_tags(
    model: nn.Module, scores: Tensor, words: Tensor, rules: TransitionRules | None
) -> list[list[int]]:
    """Each sentence's tag ids from its word scores ``(B, W, K)``: the CRF's Viterbi path, or
    the softmax's most probable sequence; both restricted by ``rules`` (BIO) when given."""
    scores = scores.float()
    crf = _crf(model)
    if crf is not None:
        return crf.decode(scores, words, constrained=rules is not None, rules=rules)
    if rules is not None:
        return constrained_decode(scores.log_softmax(-1), words, rules)
    best = scores.argmax(-1)  # (B, W)
    return [best[row, : int(n)].tolist() for row, n in enumerate(words.sum(-1))]

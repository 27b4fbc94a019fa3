"""What an encoder span reader reads: ``[CLS] question [SEP] passage window [SEP]`` subword ids,
the position of each word's first subword, and windows for passages longer than the encoder.

A question's words and its passage's become subwords through the run's vocabulary (a BPE
trained on the training text, or a pretrained encoder's WordPiece: :class:`TextInputs`). The
passage is cut into windows of whole words (:func:`~qkv.tasks.windows.overlapping_windows`,
which the tagger's long texts share) so that each fits ``data.max_len`` ids beside the question
(which may take at most half of them); neighbouring windows share up to ``data.window_overlap``
subwords (at most a quarter of ``max_len``), so an answer of that many subwords lies whole in
some window (Devlin et al. 2019 read SQuAD with a "doc stride" the same way). Training reads
every window: one without a gold answer teaches the reader to point at ``[CLS]``, the null
answer (:mod:`qkv.models.encoder_span_reader`); answering reads every window and keeps the most
probable span of any
(:class:`~qkv.tasks.reading.runner.Reader`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from qkv.data.errors import DataError
from qkv.data.labelled.word_shape import SHAPES, word_shape
from qkv.data.pairs.batching import plan_by_cost
from qkv.models.encoder_span_reader import EncoderSpanReader
from qkv.tasks.encoder_inputs import TextInputs
from qkv.tasks.encoder_run import prepare_encoder
from qkv.tasks.reading.config import ReadingDataConfig
from qkv.tasks.reading.inputs import ReadingExample, Window, batch_to, gold_spans
from qkv.tasks.run_dir import TOKENIZER_FILE
from qkv.tasks.run_skeleton import TrainingRun
from qkv.tasks.windows import overlapping_windows


@dataclass(frozen=True)
class SubwordBatch:
    """Padded windows: ``ids (B, T)`` and ``keep``; each word's first subword,
    ``passage_first (B, S)`` and ``question_first (B, Q)`` with their keep-masks; spans:
    ``spans (B, G, 2)`` with ``span_keep (B, G)``, the gold answers in window word positions;
    ``passage_shapes (B, S)``: each passage word's shape, for a reader with the casing feature."""

    ids: Tensor
    keep: Tensor
    passage_first: Tensor
    passage_keep: Tensor
    question_first: Tensor
    question_keep: Tensor
    spans: Tensor | None = None
    span_keep: Tensor | None = None
    passage_shapes: Tensor | None = None

    def to(self, device: torch.device | str) -> SubwordBatch:
        return batch_to(self, device)

    def inputs(self) -> dict[str, Tensor]:
        """The keyword arguments of the reader's ``forward``."""
        names = ["ids", "keep", "passage_first", "passage_keep", "question_first", "question_keep"]
        if self.passage_shapes is not None:
            names.append("passage_shapes")
        return {name: getattr(self, name) for name in names}

    @property
    def size(self) -> int:
        return self.ids.size(0)

    def tokens(self) -> int:
        """The engine's token count: the real subwords read."""
        return int(self.keep.sum())


def _positions(rows: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """``(values (B, W), keep (B, W))`` of rows of ints, right-padded with 0."""
    longest = max(len(r) for r in rows)
    first = torch.zeros(len(rows), longest, dtype=torch.long)
    keep = torch.zeros(len(rows), longest, dtype=torch.bool)
    for i, row in enumerate(rows):
        first[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        keep[i, : len(row)] = True
    return first, keep


class SubwordReading:
    """The inputs of an encoder span reader (see the module docstring).

    Args:
        inputs: the run's vocabulary and ``max_len``.
        overlap: the subwords neighbouring windows share (``data.window_overlap``).
        casing: the batches carry each passage word's shape (a model with ``casing_dim > 0``).
    """

    def __init__(self, inputs: TextInputs, overlap: int, casing: bool = False) -> None:
        self.inputs, self.overlap, self.casing = inputs, overlap, casing

    @classmethod
    def prepare(
        cls, run: TrainingRun, data: ReadingDataConfig, train: Sequence[ReadingExample]
    ) -> tuple[SubwordReading, nn.Module]:
        """The vocabulary (a pretrained encoder's, or a BPE trained on ``train``'s text) and the
        model, saved to the run's directory (:func:`~qkv.tasks.encoder_run.prepare_encoder`)."""
        text = [" ".join(words) for ex in train for words in (ex.passage, ex.question)]
        encoder = prepare_encoder(
            run, labels=None, bpe_text=text, data=data, extra={"num_shapes": len(SHAPES)}
        )
        model = encoder.model
        assert isinstance(model, EncoderSpanReader)  # the one family that reads subwords
        casing = model.config.casing_dim > 0
        return cls(encoder.inputs, data.window_overlap, casing), model

    @classmethod
    def load(cls, directory: Path, data: ReadingDataConfig, model_config: Any) -> SubwordReading:
        """The inputs of the model in ``directory`` (its config ``model_config``)."""
        inputs = TextInputs.load(
            directory / TOKENIZER_FILE, kind=data.tokenizer, max_len=data.max_len
        )
        return cls(inputs, data.window_overlap, model_config.casing_dim > 0)

    @property
    def vocab_size(self) -> int:
        return self.inputs.vocab_size

    def windows(self, examples: Sequence[ReadingExample]) -> list[Window]:
        """Every window of every example, in order, with the gold spans lying whole in it."""
        cls_id, sep_id, max_len = self.inputs.cls_id, self.inputs.sep_id, self.inputs.max_len
        out = []
        for number, ex in enumerate(examples):
            question = [cls_id]
            question_first = []
            for piece in self.inputs.subwords(ex.question):
                question_first.append(len(question))
                question.extend(piece)
            question.append(sep_id)
            budget = max_len - 1 - len(question)
            if budget < max_len // 2:
                raise DataError(
                    f"question {ex.id!r} has {len(question) - 2} subwords; with data.max_len="
                    f"{max_len} a question may have at most {max_len - 1 - max_len // 2 - 2}: "
                    "shorten it or raise data.max_len"
                )
            pieces = [p[:budget] for p in self.inputs.subwords(ex.passage)]
            shapes = [word_shape(word) for word in ex.passage]
            for start, end in overlapping_windows([len(p) for p in pieces], budget, self.overlap):
                spans = tuple((a - start, b - start) for a, b in ex.spans if start <= a <= b < end)
                ids, passage_first = list(question), []
                for piece in pieces[start:end]:
                    passage_first.append(len(ids))
                    ids.extend(piece)
                ids.append(sep_id)
                out.append(
                    Window(number, start, end - start, len(ids), spans, tuple(ids),
                           tuple(question_first), tuple(passage_first), tuple(shapes[start:end]))
                )  # fmt: skip
        return out

    def collate(
        self, examples: Sequence[ReadingExample], windows: Sequence[Window]
    ) -> SubwordBatch:
        """One batch of ``windows`` (of ``examples``)."""
        if not windows:
            raise ValueError("cannot collate an empty batch")
        longest = max(w.cost for w in windows)
        ids = torch.full((len(windows), longest), self.inputs.pad_id, dtype=torch.long)
        keep = torch.zeros(len(windows), longest, dtype=torch.bool)
        for i, w in enumerate(windows):
            ids[i, : w.cost] = torch.as_tensor(w.ids, dtype=torch.long)
            keep[i, : w.cost] = True
        passage_first, passage_keep = _positions([w.passage_first for w in windows])
        question_first, question_keep = _positions([w.question_first for w in windows])
        shapes = _positions([w.passage_shapes for w in windows])[0] if self.casing else None
        return SubwordBatch(
            ids, keep, passage_first, passage_keep, question_first, question_keep,
            **gold_spans([w.spans for w in windows], always=True), passage_shapes=shapes,
        )  # fmt: skip

    def training_batches(
        self, examples: Sequence[ReadingExample], *, max_tokens: int, seed: int, **_: Any
    ) -> Callable[[int, int], Iterator[SubwordBatch]]:
        """``(epoch, start) -> batches`` of the training windows, length-grouped, at most
        ``max_tokens`` padded subwords each, shuffled by ``seed`` and the epoch."""
        windows = self.windows(examples)
        if not any(w.spans for w in windows):
            raise DataError("no training window holds a gold answer whole")
        costs = np.array([w.cost for w in windows])

        def batches(epoch: int, start: int) -> Iterator[SubwordBatch]:
            plan = plan_by_cost(costs, max_tokens=max_tokens, shuffle=True, seed=seed, epoch=epoch)
            for indices in plan[start:]:
                yield self.collate(examples, [windows[i] for i in indices])

        return batches

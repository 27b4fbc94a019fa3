"""Text classification end to end: train an encoder classifier on a labelled corpus (from
scratch, or fine-tuning a pretrained BERT-family encoder such as all-MiniLM-L6-v2), classify new
text, and score it (accuracy, macro-F1, per-label precision/recall/F1).

A trained model directory holds ``config.json`` (``task: classification``, the model, its
labels), ``model.safetensors`` (the best weights by validation accuracy), ``tokenizer.json``
(the BPE trained on the training text, or a copy of the pretrained encoder's vocabulary),
``metrics.csv`` and the run's checkpoints.
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

from qkv.data.labelled.sentiment import ClassificationCorpus, load_classification_corpus
from qkv.data.pairs.batching import plan_by_cost
from qkv.evaluation.classification import LabelScores, accuracy, macro_f1, per_label_scores
from qkv.tasks.classification.config import (
    PAPER_PENALTY_WEIGHT,
    ClassificationDataConfig,
    ClassificationTrainConfig,
)
from qkv.tasks.encoder_inputs import EncoderBatch, TextInputs, collate
from qkv.tasks.encoder_run import EncoderModel, load_encoder_dir, prepare_encoder, real_tokens
from qkv.tasks.input_checks import one_text, text_list
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import check_split
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.sections import PredictConfig
from qkv.tasks.spec import (
    EvaluateOptions,
    ImageView,
    Report,
    Seen,
    TokenView,
    ViewOptions,
    encoder_views,
)

logger = logging.getLogger(__name__)


# Lin et al. 2017's coefficient of the structured penalty (the bilstm-attention preset's).


def classification_loss(train: ClassificationTrainConfig):
    """``(model, batch) -> (summed loss, examples)`` for the training engine: cross-entropy,
    plus ``train.penalty_weight`` times the structured self-attention penalty
    ``||A A^T - I||_F^2`` (Lin et al. 2017, eq. 8; a batch mean) when the model returns one."""
    weight = PAPER_PENALTY_WEIGHT if train.penalty_weight is None else train.penalty_weight

    def loss_fn(model: nn.Module, batch: EncoderBatch) -> tuple[Tensor, Tensor]:
        out = model(batch.ids, keep=batch.keep)
        size = batch.ids.size(0)
        loss = F.cross_entropy(out.logits.float(), batch.labels, reduction="sum")
        if out.penalty is not None and weight:
            loss = loss + weight * out.penalty * size  # the batch mean, as a sum
        return loss, torch.tensor(size)

    return loss_fn


def encode_examples(inputs: TextInputs, texts: Sequence[str]) -> tuple[list[list[int]], int]:
    """The ids of each text and how many were cut to ``max_len``."""
    encoded = [inputs.encode(text) for text in texts]
    return [ids for ids, _ in encoded], sum(cut for _, cut in encoded)


def example_batches(
    rows: Sequence[list[int]],
    labels: Tensor,
    pad_id: int,
    *,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
) -> Iterator[EncoderBatch]:
    """Length-grouped batches of at most ``max_tokens`` padded ids (see
    :func:`qkv.data.pairs.batching.plan_by_cost`); ``labels`` indexed like ``rows``."""
    plan = plan_by_cost(
        np.array([len(row) for row in rows]),
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
    )
    for indices in plan[start:]:
        yield collate([rows[i] for i in indices], pad_id, labels[indices])


def train_classifier(run: TrainingRun) -> Trained:
    """Train ``config``'s classifier; the best weights (by validation accuracy) go to
    ``config.out_dir``."""
    config = run.config
    data = config.section("data", ClassificationDataConfig)
    corpus = load_classification_corpus(data.corpus, **data.options)
    encoder = prepare_encoder(
        run,
        labels=corpus.labels,
        label_key="num_labels",
        bpe_text=[ex.text for ex in corpus.train],
    )
    index = {label: i for i, label in enumerate(corpus.labels)}
    train_rows, cut = encode_examples(encoder.inputs, [ex.text for ex in corpus.train])
    if cut:
        logger.info("%d of %d training texts cut to data.max_len", cut, len(train_rows))
    train_labels = torch.tensor([index[ex.label] for ex in corpus.train])
    valid_rows, _ = encode_examples(encoder.inputs, [ex.text for ex in corpus.valid])
    valid_labels = torch.tensor([index[ex.label] for ex in corpus.valid])
    model, pad_id = encoder.model, encoder.inputs.pad_id
    device_of = lambda: next(model.parameters()).device  # noqa: E731

    def evaluate() -> dict[str, float]:
        predicted = []
        for batch in example_batches(
            valid_rows, valid_labels, pad_id, max_tokens=config.train.batch_tokens, shuffle=False
        ):
            batch = batch.to(device_of())
            predicted.extend(model(batch.ids, keep=batch.keep).logits.argmax(-1).tolist())
        gold = valid_labels.tolist()
        return {
            "valid_accuracy": accuracy(gold, predicted),
            "valid_macro_f1": macro_f1(gold, predicted),
        }

    return run.train(
        model,
        loss_fn=classification_loss(config.section("train", ClassificationTrainConfig)),
        batches=lambda epoch, start: example_batches(
            train_rows,
            train_labels,
            pad_id,
            max_tokens=config.train.batch_tokens,
            shuffle=True,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        count_tokens=real_tokens,
    )


@dataclass(frozen=True)
class Prediction:
    """One text's label and the probability of every label."""

    label: str
    probabilities: dict[str, float]

    @classmethod
    def of(cls, labels: Sequence[str], probabilities: Tensor) -> Prediction:
        """The prediction of one row of probabilities ``(K,)`` over ``labels``."""
        return cls(
            labels[int(probabilities.argmax())],
            {label: float(v) for label, v in zip(labels, probabilities, strict=True)},
        )

    def output(self) -> dict[str, object]:
        """As a view's JSON-ready output: ``label (probability)`` as its summary."""
        return {
            "summary": f"{self.label} ({self.probabilities[self.label]:.2f})",
            "label": self.label,
            "probabilities": dict(self.probabilities),
        }


@dataclass(frozen=True)
class ClassificationEvaluation:
    """Scores on one split; ``per_label`` maps each label to its precision, recall, F1 and
    support."""

    split: str
    examples: int
    accuracy: float
    macro_f1: float
    per_label: dict[str, LabelScores]

    @classmethod
    def of(
        cls, split: str, gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]
    ) -> ClassificationEvaluation:
        """The scores of ``predicted`` against ``gold`` over ``labels``."""
        return cls(
            split,
            len(gold),
            accuracy(gold, predicted),
            macro_f1(gold, predicted, labels=list(labels)),
            per_label_scores(gold, predicted, labels=list(labels)),
        )

    def lines(self) -> list[str]:
        """What ``qkv evaluate`` prints."""
        lines = [
            f"{self.split}: {self.examples:,} examples",
            f"accuracy {self.accuracy:.4f}  macro-F1 {self.macro_f1:.4f}",
        ]
        for label, scores in self.per_label.items():
            lines.append(
                f"  {label:<12} precision {scores.precision:.3f}  recall {scores.recall:.3f}  "
                f"F1 {scores.f1:.3f}  (n={scores.support})"
            )
        return lines

    def report(self, complete: bool = True) -> Report:
        record = {k: v for k, v in asdict(self).items() if k != "split"}
        return Report(self.split, self.lines(), record, complete=complete)


UNKNOWN = "the model cannot read them, so their labels mean little"


class Classifier:
    """A trained classifier with its vocabulary and labels.

    Texts longer than the ``data.max_len`` ids it was trained on are cut to them (the model's
    position table holds at least that many), with an
    :class:`~qkv.tasks.input_checks.InputWarning`; texts made mostly of unknown tokens warn
    too.
    """

    def __init__(self, encoder: EncoderModel, config: RunConfig) -> None:
        self.model, self.inputs, self.config = encoder.model.eval(), encoder.inputs, config
        self.labels: tuple[str, ...] = encoder.labels

    @classmethod
    def load(cls, model_dir: str | Path) -> Classifier:
        encoder, config = load_encoder_dir(model_dir, task="classification")
        return cls(encoder, config)

    def _logits(self, rows: list[list[int]]) -> Tensor:
        """Logits ``(N, K)`` in the order of ``rows``, batched by length."""
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = torch.empty(len(rows), len(self.labels))
        size = self.config.section("decode", PredictConfig).batch_size
        with torch.inference_mode():
            for begin in range(0, len(order), size):
                chosen = order[begin : begin + size]
                batch = collate([rows[i] for i in chosen], self.inputs.pad_id)
                out[chosen] = self.model(batch.ids, keep=batch.keep).logits.float()
        return out

    def predict(self, texts: Sequence[str]) -> list[Prediction]:
        """The label of each text of ``texts``, a list of str (a bare str is a ``TypeError``:
        it would be read as its characters); long texts are cut, with a warning."""
        texts = text_list(texts)
        if not texts:
            return []
        rows = self.inputs.encode_texts(texts, unknown=UNKNOWN)
        probabilities = self._logits(rows).softmax(-1)
        return [Prediction.of(self.labels, p) for p in probabilities]

    def token_count(self, text: str) -> int:
        """The ids :meth:`attention` reads for ``text`` (``[CLS]``/``[SEP]`` included, cut to
        the model's length), by the tokenizer alone."""
        return len(self.inputs.encode(one_text(text))[0])

    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """The tokens of ``text`` (with ``[CLS]``/``[SEP]``) and each layer's self-attention
        ``(H, T, T)``, for plots (a long text is cut, with a warning)."""
        ids = self._encode_one(text)
        with torch.inference_mode():
            out = self.model(torch.tensor([ids]), need_weights=True)
        tokens = [self.inputs.tokenizer.id_to_token(i) for i in ids]
        return tokens, [w[0] for w in out.attentions or []]

    def pooling_weights(self, text: str) -> tuple[list[str], Tensor | None]:
        """The tokens of ``text`` and the pooling's weights over them: ``(r, T)`` for
        structured self-attention (one row per hop), ``(1, T)`` for attention pooling, ``None``
        for cls/mean/max pooling."""
        ids = self._encode_one(text)
        with torch.inference_mode():
            out = self.model(torch.tensor([ids]), need_weights=True)
        tokens = [self.inputs.tokenizer.id_to_token(i) for i in ids]
        weights = out.pooling_weights
        if weights is None:
            return tokens, None
        return tokens, weights[0] if weights.dim() == 3 else weights  # (r, T)

    def _encode_one(self, text: str) -> list[int]:
        text = one_text(text, several="predict(texts)")
        (ids,) = self.inputs.encode_texts([text], unknown=UNKNOWN, single=True, stacklevel=5)
        return ids

    def evaluate(
        self,
        split: str = "test",
        corpus: ClassificationCorpus | None = None,
        *,
        limit: int | None = None,
    ) -> ClassificationEvaluation:
        """Accuracy, macro-F1 and per-label scores on ``split`` of the model's corpus (its
        first ``limit`` examples when given)."""
        check_split(split)
        data = self.config.section("data", ClassificationDataConfig)
        corpus = corpus or load_classification_corpus(data.corpus, **data.options)
        examples = getattr(corpus, split)[:limit]
        if not examples:
            raise ValueError(f"the {split} split is empty")
        unknown = sorted({ex.label for ex in examples} - set(self.labels))
        if unknown:
            raise ValueError(f"the {split} split has labels this model never saw: {unknown}")
        predicted = [p.label for p in self.predict([ex.text for ex in examples])]
        gold = [ex.label for ex in examples]
        return ClassificationEvaluation.of(split, gold, predicted, self.labels)

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        return self.evaluate(split, limit=limit).report(complete=limit is None)

    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The label of ``item`` and the encoder's self-attention over it; with
        ``options.pooling``, the pooling's weights over the tokens first (one row per hop)."""
        views: list[TokenView | ImageView] = []
        if options is not None and options.pooling:
            tokens, weights = self.pooling_weights(item)
            if weights is None:
                raise ValueError(
                    f"this model pools with {self.model.config.pooling!r}, which has no weights; "
                    "pooling weights need attention or structured pooling"
                )
            hops = [f"hop {i}" for i in range(weights.size(0))]
            views.append(
                TokenView("pooling", "pooling weights (hop x token)", hops, tokens,
                          [weights[None]], False, ("token", "hop"))
            )  # fmt: skip
        views += encoder_views(*self.attention(item))
        return Seen(self.predict([item])[0].output(), views)

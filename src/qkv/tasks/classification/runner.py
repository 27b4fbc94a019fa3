"""The classification runner: a trained classifier directory loaded as a :class:`Classifier`
(predict, evaluate, report, views)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from qkv.data.labelled.sentiment import ClassificationCorpus, load_classification_corpus
from qkv.evaluation.classification import LabelScores, accuracy, macro_f1, per_label_scores
from qkv.models.classifier import EncoderClassifier
from qkv.tasks.classification.config import (
    ClassificationDataConfig,
)
from qkv.tasks.encoder_inputs import collate
from qkv.tasks.encoder_run import EncoderModel, load_encoder_dir
from qkv.tasks.input_checks import one_text, text_list
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import check_split
from qkv.tasks.sections import PredictConfig
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.view_extras import checked_views, encoder_extras, encoder_token_views


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
        scores = per_label_scores(gold, predicted, labels=list(labels))
        return cls(
            split,
            len(gold),
            accuracy(gold, predicted),
            macro_f1(gold, predicted, labels=list(labels)),
            {label: scores[label] for label in labels},  # keyed by the str labels, in order
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
        model = encoder.model
        assert isinstance(model, EncoderClassifier)  # the task's one family
        self.model, self.inputs, self.config = model.eval(), encoder.inputs, config
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

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add, from the model
        alone (:func:`~qkv.tasks.view_extras.encoder_extras`)."""
        return encoder_extras(self.model, self.model.config.attends)

    @checked_views
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
        views += encoder_token_views(
            self.model, lambda: self.attention(item), options or ViewOptions()
        )
        return Seen(self.predict([item])[0].output(), views)

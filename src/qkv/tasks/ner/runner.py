"""The named-entity runner: :class:`EntityTagger`, a :class:`~qkv.tasks.tagging.runner.Tagger`
that decodes valid BIO sequences and scores entities (conlleval's F1 with a bootstrap
interval)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qkv.data.labelled.entities import load_entity_corpus
from qkv.data.labelled.tagged import TaggingCorpus
from qkv.evaluation.classification import token_accuracy
from qkv.evaluation.entities import EntityReport, bootstrap_f1, entities, entity_scores
from qkv.layers.crf import TransitionRules, bio_transitions
from qkv.tasks.ner.config import EntityDataConfig
from qkv.tasks.run_dir import check_split
from qkv.tasks.seen import Seen
from qkv.tasks.spec import EvaluateOptions, Report, ViewOptions
from qkv.tasks.tagging.output import entity_records, spans_text
from qkv.tasks.tagging.runner import Tagger
from qkv.tasks.view_extras import checked_views

BOOTSTRAP_RESAMPLES = 1000


@dataclass(frozen=True)
class EntityEvaluation:
    """Entity scores on one split, with the micro F1's bootstrap interval (``interval``:
    its 2.5th and 97.5th percentiles over sentences resampled with replacement) and the
    token accuracy of the tags."""

    split: str
    words: int
    scores: EntityReport
    interval: tuple[float, float]
    token_accuracy: float

    def lines(self) -> list[str]:
        """What ``qkv evaluate`` prints: the counts, the per-type table and the micro F1."""
        micro = self.scores.micro
        low, high = self.interval
        return [
            f"{self.split}: {self.scores.sentences:,} sentences, {self.words:,} words, "
            f"{micro.support:,} entities",
            *self.scores.lines(),
            f"entity F1 {micro.f1:.4f} (95% bootstrap interval {low:.4f}-{high:.4f}, "
            f"{BOOTSTRAP_RESAMPLES} resamples of the sentences); token accuracy "
            f"{self.token_accuracy:.4f}",
        ]

    def record(self) -> dict:
        """What ``results.json`` keeps."""
        return {
            "words": self.words,
            **self.scores.record(),
            "f1_interval": list(self.interval),
            "token_accuracy": self.token_accuracy,
        }


class EntityTagger(Tagger):
    """A trained entity tagger: :class:`~qkv.tasks.tagging.runner.Tagger` whose decoding yields only
    valid BIO sequences, whose :meth:`evaluate` scores entities, and which prints entities as
    typed spans (``qkv tag --format spans``, the default)."""

    task = "ner"
    entity_tags = True

    def decoding_rules(self, tags: Sequence[str]) -> TransitionRules:
        """BIO: ``I-X`` only after ``B-X`` or ``I-X``, never first."""
        return bio_transitions(tags)

    def word_marks(self, tags: Sequence[str]) -> list[str]:
        """Each word's mark on the attention views: the type of the entity it is in (``B-`` and
        ``I-`` merged, as the spans read them), ``""`` outside every entity."""
        marks = [""] * len(tags)
        for entity in entities(tags):
            marks[entity.start : entity.end] = [entity.type] * (entity.end - entity.start)
        return marks

    def entities(self, texts: Sequence[str]) -> list[list[dict]]:
        """The entities of each raw text: ``{"type", "start", "end", "text"}`` with word
        positions (end exclusive) into its words (:meth:`tag`)."""
        return [entity_records(tagged) for tagged in self.tag(texts)]

    def _corpus(self) -> TaggingCorpus:
        data = self.config.section("data", EntityDataConfig)
        return load_entity_corpus(data.corpus, **data.options)

    def evaluate(  # type: ignore[override]  # an entity tagger scores entities (EntityEvaluation), not tokens; report() is what both share
        self,
        split: str = "test",
        corpus: TaggingCorpus | None = None,
        *,
        limit: int | None = None,
        seed: int = 0,
    ) -> EntityEvaluation:
        """Entity precision, recall and F1 (micro and per type) on ``split`` of the model's
        corpus (its first ``limit`` sentences when given), with the bootstrap interval of F1
        (``seed`` draws the resamples)."""
        check_split(split)
        corpus = corpus or self._corpus()
        sentences = corpus.split(split)[:limit]
        if not sentences:
            raise ValueError(f"the {split} split is empty")
        predicted = self.tag_words([s.words for s in sentences])
        gold = [list(s.tags) for s in sentences]
        return EntityEvaluation(
            split,
            sum(len(g) for g in gold),
            entity_scores(gold, predicted),
            bootstrap_f1(gold, predicted, resamples=BOOTSTRAP_RESAMPLES, seed=seed),
            token_accuracy(gold, predicted),
        )

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` as the CLI prints it and ``results.json`` records it."""
        result = self.evaluate(split, limit=limit)
        return Report(split, result.lines(), result.record(), complete=limit is None)

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """The entities of ``item``, its tags and the encoder's self-attention over it."""
        seen = super().views(item, options)
        tagged = [(word, tag) for word, tag in seen.output["tags"]]
        types = sorted({tag[2:] for tag in self.tags if tag != "O"})
        output = {
            **seen.output,
            "summary": spans_text(tagged),
            "entities": entity_records(tagged),
            "types": types,
        }
        return Seen(output, seen.views, seen.subject)

"""The numbers of the cloze data card (docs/data/cloze.md): questions per kind, split and source,
passage lengths, and the accuracy of trivial baselines on valid and test:

- random: one candidate of ten, uniformly (expected accuracy 1/10, not sampled);
- most frequent: the candidate written most often in the passage (exact token), ties broken by
  the candidate's first occurrence (the earliest wins);
- last: the candidate whose last occurrence in the passage is latest;

and the share of questions whose answer is among the most frequent candidates (all tied ones).
Writes docs/data/cloze.json and the table between the card's markers.

    python benchmarks/cloze_card.py
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections import Counter

from harness import ROOT
from harness.report import command_block, log, splice, table

from qkv.data.reading.cloze import KINDS, SOURCES, ClozeQuestion, load_cloze
from qkv.io import atomic_write_json

CARD = ROOT / "docs" / "data" / "cloze.md"
RESULTS = ROOT / "docs" / "data" / "cloze.json"
BEGIN, END = "<!-- cloze-card:begin -->", "<!-- cloze-card:end -->"
COMMAND = "python benchmarks/cloze_card.py"


def baselines(question: ClozeQuestion) -> dict[str, bool]:
    """Whether each trivial baseline answers ``question`` right."""
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    candidates = set(question.candidates)
    for i, token in enumerate(question.passage):
        if token in candidates:
            counts[token] += 1
            first.setdefault(token, i)
            last[token] = i
    top = max(counts.values())
    most = min((c for c in counts if counts[c] == top), key=first.__getitem__)
    return {
        "most_frequent": most == question.answer,
        "answer_most_frequent": counts[question.answer] == top,
        "last": max(last, key=last.__getitem__) == question.answer,
    }


def measure() -> dict:
    results: dict = {"kinds": {}}
    for kind in KINDS:
        started = time.perf_counter()
        corpus = load_cloze(kind)
        seconds = time.perf_counter() - started
        log(f"{corpus.name}: {corpus.sizes()} in {seconds:.1f} s")
        record: dict = {"name": corpus.name, "split_note": corpus.split_note, "splits": {}}
        for split in ("train", "valid", "test"):
            questions = corpus.split(split)
            by_source = Counter(q.source.split(":", 1)[0] for q in questions)
            entry: dict = {
                "questions": len(questions),
                "by_source": {s: by_source[s] for s in SOURCES},
                "passage_tokens_mean": (
                    statistics.fmean(len(q.passage) for q in questions) if questions else 0.0
                ),
            }
            if split != "train":
                hits: Counter[str] = Counter()
                for q in questions:
                    hits.update(name for name, right in baselines(q).items() if right)
                entry["accuracy"] = {
                    "random": 0.1,
                    **{name: hits[name] / len(questions) for name in
                       ("most_frequent", "last", "answer_most_frequent")},
                }  # fmt: skip
            record["splits"][split] = entry
        results["kinds"][kind] = record
        del corpus
    return results


def section(results: dict) -> str:
    count_rows, base_rows = [], []
    for kind, record in results["kinds"].items():
        for split, entry in record["splits"].items():
            sources = entry["by_source"]
            count_rows.append([
                kind, split, f"{entry['questions']:,}", f"{sources['bible']:,}",
                f"{sources['shakespeare']:,}", f"{entry['passage_tokens_mean']:.0f}",
            ])  # fmt: skip
            if "accuracy" in entry:
                acc = entry["accuracy"]
                base_rows.append([
                    kind, split, f"{acc['random']:.3f}", f"{acc['most_frequent']:.3f}",
                    f"{acc['last']:.3f}", f"{acc['answer_most_frequent']:.3f}",
                ])  # fmt: skip
    lines = [
        BEGIN,
        "Questions per kind and split (bible and shakespeare columns add up to the total), and",
        "the mean passage length in tokens:",
        "",
        *table(["kind", "split", "questions", "bible", "shakespeare", "passage tokens"],
               count_rows),
        "",
        "Accuracy of trivial baselines (fractions; the last column is the share of questions",
        "whose answer is among the most frequent candidates, ties included):",
        "",
        *table(["kind", "split", "random", "most frequent", "last in passage",
                "answer most frequent"], base_rows),
        "",
        *command_block(COMMAND),
        END,
    ]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-only", action="store_true", help="rewrite the card's table")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.report_only:
        import json

        results = json.loads(RESULTS.read_text())
    else:
        results = measure()
        atomic_write_json(RESULTS, results)
    text = section(results)
    splice(CARD, text, BEGIN, END)
    print(text)


if __name__ == "__main__":
    main()

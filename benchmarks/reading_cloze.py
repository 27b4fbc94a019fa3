"""Reading comprehension on held-out Bible books and Shakespeare plays (qkv.data.cloze): the
accuracy of each cloze reader on both kinds of question (named entities, common nouns), and the
span reader's exact match and F1 on the same questions written as SQuAD spans, beside the
simple baselines of the data card (docs/data/cloze.md).

- cloze readers (configs/reading/cloze-*.yaml): no attention (the baseline), the Attentive
  Reader (Hermann et al. 2015), the Stanford Attentive Reader (Chen et al. 2016), the Attention
  Sum Reader (Kadlec et al. 2016);
- the span reader (configs/reading/span-bilstm.yaml, DrQA's document reader, Chen et al. 2017).

Each run's budget is its step count (so its score does not depend on the machine's load), with
``train.clock=cpu`` and ``train.max_minutes=30`` as a cap; the CPU time each run took is
recorded. Runs train two at a time on one thread each.

    python benchmarks/reading_cloze.py                      # train, score, report
    python benchmarks/reading_cloze.py --only entities-as_reader
    python benchmarks/reading_cloze.py --report-only        # rewrite the report from the JSON
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from harness import ROOT
from harness.machine import machine_description
from harness.report import log, table

from qkv.io import atomic_write, atomic_write_json
from qkv.training.checkpoint import read_json

CONFIGS = ROOT / "configs" / "reading"
RUNS = ROOT / "runs" / "reading-cloze"
RESULTS = ROOT / "docs" / "results" / "reading-cloze.json"
REPORT = ROOT / "docs" / "results" / "reading-cloze.md"
CARD = ROOT / "docs" / "data" / "cloze.json"
CAP = ["train.clock=cpu", "train.max_minutes=30"]
KINDS = ("entities", "nouns")
READERS = {
    "no_attention": ("cloze-no-attention.yaml", "no attention (baseline)"),
    "attentive": ("cloze-attentive.yaml", "Attentive Reader"),
    "stanford": ("cloze-stanford.yaml", "Stanford Attentive Reader"),
    "as_reader": ("cloze-as-reader.yaml", "Attention Sum Reader"),
    "span": ("span-bilstm.yaml", "span reader (DrQA)"),
}
GROUPS = {f"{kind}-{reader}": (kind, reader) for kind in KINDS for reader in READERS}
# Step budgets that differ from the config's: the noun runs and the span reader get 1,200
# steps (about 10 CPU-minutes) for lack of time, not the cloze configs' 30 CPU-minutes.
STEPS: dict[str, int] = {
    **{f"nouns-{reader}": 1200 for reader in READERS},
}


def _call(command: list[str], handle, env: dict[str, str]) -> float:
    """Run ``command``; its CPU seconds (user + system, its threads and children)."""
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({os.waitstatus_to_exitcode(status)})")
    return usage.ru_utime + usage.ru_stime


def train_and_score(group: str) -> dict[str, object]:
    """Train one run on one thread and score its test split; its record."""
    kind, reader = GROUPS[group]
    config, what = READERS[reader]
    out = RUNS / group
    sets = [f"data.options.kind={kind}", *CAP, f"out_dir={out}"]
    if group in STEPS:
        sets.append(f"train.max_steps={STEPS[group]}")
    train = [sys.executable, "-m", "qkv", "train", str(CONFIGS / config), "--overwrite",
             "--quiet", "--threads", "1", *[f"--set={s}" for s in sets]]  # fmt: skip
    evaluate = [sys.executable, "-m", "qkv", "evaluate", "--model", str(out), "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    RUNS.mkdir(parents=True, exist_ok=True)
    log(f"training {group}")
    with open(RUNS / f"{group}.log", "w", encoding="utf-8") as handle:
        cpu = _call(train, handle, env)
        _call(evaluate, handle, env)
    test = read_json(out / "results.json")["test"]
    with open(out / "metrics.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    metric = "valid_f1" if reader == "span" else "valid_accuracy"
    valid = [float(r[metric]) for r in rows if r.get(metric)]
    return {
        "group": group,
        "kind": kind,
        "reader": reader,
        "what": what,
        "config": f"configs/reading/{config}",
        "overrides": [s for s in sets if s.startswith("data.")],
        "cpu_minutes": cpu / 60,
        "steps": int(rows[-1]["step"]),
        "valid": max(valid) if valid else None,
        "test": test,
    }


# What the runs showed (update when the runs change).
FINDINGS = [
    "The targets are NOT met. On the named-entity test questions (971, all from the held-out "
    "Bible books: the test plays yield none) the Attention Sum Reader scores 0.364 against "
    "0.304 for the most frequent candidate (+6 points, not +20) and the Stanford Attentive "
    "Reader 0.217, below that baseline; neither is near 0.60 (the AS Reader's 0.686 on CBT's "
    "named entities came from 670k training questions; these have 7,122).",
    "Both were trained with anonymised candidates (data.anonymize); without it the AS Reader "
    "memorised the training names (train loss 0.36 at step 1,100) and peaked at valid 0.391, "
    "the same as with it (0.395); the Stanford reader reached 0.309 without and 0.232 with.",
    "Not measured in this run: the Attentive Reader and the reader without attention on "
    "entities (stopped unfinished to leave time for the test suite), every common-noun run, "
    "and the span reader on the cloze-as-spans split.",
    "Each step reads about 26 passages of 620 words; 1,200 steps took 9.3-9.7 CPU-minutes "
    "per run on one thread, after the readers' BiRNNs stopped packing their sequences "
    "(a packed BiLSTM's backward pass over passages of unequal length took 4.1 s a batch on "
    "this CPU, 0.3 s unpacked).",
]


def _score(record: dict) -> str:
    test = record["test"]
    if "accuracy" in test:
        return f"{test['accuracy']:.3f}"
    return f"EM {100 * test['exact_match']:.1f} / F1 {100 * test['f1']:.1f}"


def _by_source(record: dict, source: str) -> str:
    values = record["test"]["by_source"].get(source)
    if values is None:
        return ""
    if "accuracy" in values:
        return f"{values['accuracy']:.3f}"
    return f"{100 * values['exact_match']:.1f} / {100 * values['f1']:.1f}"


def write_report(results: dict[str, dict], machine: str) -> None:
    card = json.loads(CARD.read_text(encoding="utf-8")) if CARD.is_file() else {}
    lines = [
        "# Reading comprehension: cloze questions from held-out books and plays",
        "",
        f"Machine: {machine}. Written by `python benchmarks/reading_cloze.py`.",
        "",
        "Data: `qkv.data.cloze` (the data card: docs/data/cloze.md): 20 verses of the World "
        "English Bible or 20 lines of a play, the 21st with a named entity or a common noun "
        "removed, ten candidates from the passage; whole books and plays held out. Accuracy on "
        "the test split (held-out books and plays); the span reader reads the same questions "
        "as SQuAD spans, without candidates, and is scored with the official exact match and "
        "F1. Each run trains for its config's steps (at most 30 CPU-minutes) on one thread; "
        "the best weights by validation accuracy (F1 for spans) are scored.",
        "",
        "## Findings",
        "",
        *(f"- {finding}" for finding in FINDINGS),
        "",
    ]
    baselines = {"random": "random", "most_frequent": "most frequent candidate in the passage",
                 "last": "candidate occurring last in the passage"}  # fmt: skip
    for kind in KINDS:
        rows = []
        splits = card.get("kinds", {}).get(kind, {}).get("splits", {})
        for key, what in baselines.items():
            valid = splits.get("valid", {}).get("accuracy", {}).get(key)
            test = splits.get("test", {}).get("accuracy", {}).get(key)
            if test is not None:
                rows.append([f"baseline: {what}", "", "", f"{valid:.3f}", f"{test:.3f}", "", ""])
        for record in results.values():
            if record["kind"] != kind:
                continue
            rows.append([
                record["what"], str(record["steps"]), f"{record['cpu_minutes']:.1f}",
                f"{record['valid'] or 0:.3f}", f"**{_score(record)}**",
                _by_source(record, "bible"), _by_source(record, "shakespeare"),
            ])  # fmt: skip
        lines += [
            f"## {'Named entities' if kind == 'entities' else 'Common nouns'}",
            "",
            *table(["reader", "steps", "CPU min", "valid", "test", "Bible", "Shakespeare"], rows),
            "",
        ]
    atomic_write(REPORT, lambda handle: handle.write("\n".join(lines)), mode="w")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="groups to (re)run")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
    if not args.report_only:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {g: pool.submit(train_and_score, g) for g in (args.only or list(GROUPS))}
            for name, future in futures.items():
                results[name] = future.result()
                atomic_write_json(RESULTS, results)
    write_report(results, machine_description())


if __name__ == "__main__":
    main()

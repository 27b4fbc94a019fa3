"""Language-model quality: train a preset (by default the character-level GPT on Shakespeare for
30 minutes), then record its validation and test loss (nats and bits per character), its
training curve and samples of generated text in ``docs/results/NAME.md``.

    PYTHONPATH=src python benchmarks/lm_quality.py                 # trains, then reports
    PYTHONPATH=src python benchmarks/lm_quality.py --skip-train    # reports on runs/NAME
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

from harness.machine import machine_description

from qkv.decoding.sampling import SamplingConfig
from qkv.io import atomic_write
from qkv.tasks.language_model.runner import LanguageModel
from qkv.tasks.run_config import load_run_config
from qkv.viz.curves import plot_training_curves

PROMPTS = ("ROMEO.\n", "KING HENRY.\nNow, my lords,", "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/lm/shakespeare-char.yaml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--results", type=Path, default=Path("docs/results"))
    args = parser.parse_args()
    config = load_run_config(args.config)
    run = Path(config.out_dir)
    command = f"qkv train {args.config} --threads {args.threads} --overwrite"
    if not args.skip_train:
        subprocess.run([sys.executable, "-m", "qkv", *command.split()[1:], "--quiet"], check=True)
    lm = LanguageModel.load(run)
    valid, test = lm.evaluate("valid"), lm.evaluate("test")
    curve = plot_training_curves(
        run / "metrics.csv", args.results / f"{config.name}-curves.png", title=config.name
    )
    with open(run / "metrics.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    clock = {int(r["step"]): float(r["minutes"]) for r in rows if r.get("minutes")}
    evals = [
        {**r, "minutes": max(m for s, m in clock.items() if s <= int(r["step"]))}
        for r in rows
        if r.get("valid_loss")
    ]
    minutes = max(clock.values())
    first_under = next((r for r in evals if float(r["valid_loss"]) <= 1.5), None)
    samples = lm.generate(
        list(PROMPTS), SamplingConfig(max_new_tokens=400, temperature=0.8, top_k=40, seed=0)
    )
    lines = [
        f"# {config.name}: a character-level GPT on Shakespeare",
        "",
        f"Trained with `{command}` on {machine_description()} "
        f"({time.strftime('%Y-%m-%d')}); reported with "
        f"`PYTHONPATH=src python benchmarks/lm_quality.py --skip-train`.",
        "",
        f"- model: {lm.model.config.num_layers} layers, width {lm.model.config.d_model}, "
        f"{lm.model.config.num_heads} heads, context {config.data.block_size} characters, "
        f"{sum(p.numel() for p in lm.model.parameters()):,} parameters, "
        f"vocabulary {lm.tokenizer.vocab_size}",
        f"- training: {rows[-1]['step']} steps in {minutes:.1f} min of wall time "
        f"({config.train.precision}, {args.threads} threads), "
        f"{config.train.batch_tokens} characters per step",
        f"- split: {config.data.corpus} (held-out works: Julius Caesar, The Tempest for "
        "validation; Macbeth, Twelfth Night for test)",
        "",
        "| split | characters | loss (nats/char) | perplexity | bits per character |",
        "|---|---|---|---|---|",
    ]
    for result in (valid, test):
        lines.append(
            f"| {result.split} | {result.chars:,} | {result.loss:.4f} | {result.perplexity:.3f} "
            f"| {result.bits_per_char:.4f} |"
        )
    lines += [
        "",
        "Target: validation loss <= 1.5 nats per character within 30 minutes. On the whole "
        f"validation split the final model scores {valid.loss:.4f} "
        + ("(met)" if valid.loss <= 1.5 else "(missed)")
        + f" after {minutes:.1f} minutes. The validation during training scores only the first "
        f"{config.data.valid_tokens:,} characters of the validation works (the table below), "
        "which score lower than the whole split"
        + (
            f"; it passed 1.5 at step {first_under['step']}, after "
            f"{float(first_under['minutes']):.1f} minutes."
            if first_under
            else "."
        ),
        "",
        "| step | minutes | validation loss |",
        "|---|---|---|",
        *[
            f"| {r['step']} | {float(r['minutes']):.1f} | {float(r['valid_loss']):.4f} |"
            for r in evals
        ],
        "",
        f"![training curve]({curve.name})",
        "",
        "## Samples",
        "",
        "`temperature 0.8, top-k 40, seed 0`, 400 characters after each prompt:",
        "",
    ]
    for prompt, text in zip(PROMPTS, samples, strict=True):
        lines += ["```", (prompt + text).strip("\n"), "```", ""]
    path = args.results / f"{config.name}.md"
    report = "\n".join(lines)
    atomic_write(path, lambda handle: handle.write(report.encode("utf-8")))
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

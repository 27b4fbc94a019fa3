"""``qkv plot-curves RUN_DIR [-o FILE]``: the loss and validation curves of a training run."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot-curves",
        help="plot a run's training and validation curves",
        description="Draw train/valid loss (and validation BLEU) against the step from "
        "RUN_DIR/metrics.csv.",
    )
    parser.add_argument("run_dir", help="a run directory written by qkv train")
    parser.add_argument(
        "-o", "--output", default=None, help="image file (default: RUN_DIR/curves.png)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.io import check_output_file
    from qkv.viz.curves import plot_training_curves

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run directory {run_dir}")
    output = Path(args.output) if args.output else run_dir / "curves.png"
    check_output_file(output)
    path = plot_training_curves(run_dir / "metrics.csv", output, title=run_dir.name)
    print(f"wrote {path}")
    return 0

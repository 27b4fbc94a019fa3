"""``qkv study length``: BLEU by source length for the fixed-context RNN, the attention RNN and
the Transformer under one time budget. ``qkv study scores``: the attention core's demonstration
(every score function learns a known alignment; the same as ``qkv demo``)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "study",
        help="run a documented study (length: BLEU by source length; scores: every score "
        "function learns an alignment)",
        description="length: train several models with the same budget and write a table and a "
        "plot. scores: the attention core's demonstration, as `qkv demo` prints it (not `make "
        "demo`, which trains the translation demo).",
    )
    parser.add_argument("name", choices=["length", "scores"], help="which study")
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes per model")
    parser.add_argument(
        "--configs",
        nargs="+",
        default=None,
        metavar="CONFIG",
        help="run configurations to compare: packaged names (see `qkv configs`) or YAML files "
        "(default: the fixed-context RNN, the Bahdanau RNN and the Transformer)",
    )
    parser.add_argument("--out", default="docs/results", help="where the report and plot go")
    parser.add_argument("--runs", default="runs/length-study", help="where the models go")
    parser.add_argument("--beam", type=int, default=None, help="beam size for the test split")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.name == "scores":
        from qkv.cli.demo import format_report
        from qkv.studies.score_functions import run_demo

        print(format_report(run_demo()))
        return 0
    from qkv.studies.length import DEFAULT_CONFIGS, run_length_study

    if args.minutes <= 0:
        raise ValueError(f"--minutes must be positive, got {args.minutes}")

    def report(row) -> None:
        buckets = ", ".join(f"{b.label}: {b.bleu:.1f}" for b in row.buckets)
        print(f"{row.name}: BLEU {row.scores.bleu:.2f}, chrF {row.scores.chrf:.2f}; {buckets}")

    run_length_study(
        args.configs or DEFAULT_CONFIGS,
        minutes=args.minutes,
        out_dir=args.out,
        runs_dir=args.runs,
        beam_size=args.beam,
        progress=not args.quiet,
        on_model=report,
    )
    print(f"wrote {args.out}/length-study.md and length-study.png")
    return 0

"""``qkv train CONFIG [--set key=value ...]``: train a model from a YAML run configuration."""

from __future__ import annotations

import argparse
import logging


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model from a YAML configuration",
        description="Train the model of a run configuration (see configs/) and keep the best "
        "weights, tokenizers and metrics in its out_dir.",
    )
    parser.add_argument("config", help="YAML run configuration, e.g. configs/transformer.yaml")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set train.max_minutes=5 --set out_dir=runs/x",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads for PyTorch (default: its own choice); use 1 per job when running "
        "several jobs on one machine",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.tasks.run_config import load_run_config
    from qkv.tasks.translation import train_translation

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    config = load_run_config(args.config, args.overrides)
    print(f"training {config.name} ({config.family}) into {config.out_dir}")
    trained = train_translation(config, progress=not args.quiet)
    result = trained.result
    clock = "" if config.train.clock == "wall" else f" ({result.clock_seconds / 60:.1f} CPU min)"
    print(
        f"stopped after {result.steps} steps, {result.seconds / 60:.1f} min{clock} "
        f"({result.stopped}); "
        f"{trained.parameters:,} parameters"
    )
    if result.best is not None:
        best = ", ".join(f"{k} {v:.4g}" for k, v in result.best.items() if k != "step")
        print(f"best at step {result.best['step']}: {best}")
    print(f"model saved in {trained.model_dir}")
    return 0

"""``qkv train CONFIG [--set key=value ...]`` trains a model from a YAML run configuration;
``qkv train --resume RUN_DIR`` continues a stopped run exactly where its last checkpoint left it."""

from __future__ import annotations

import argparse
import logging
import signal


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model from a YAML configuration, or resume a stopped run",
        description="Train the model of a run configuration (see configs/) and keep the best "
        "weights, tokenizers, metrics and checkpoints in its out_dir. Ctrl-C (SIGINT) or SIGTERM "
        "finishes the current step, saves a checkpoint (whatever train.checkpoint_every says) and "
        "exits with 130 or 143; --resume continues from it.",
    )
    parser.add_argument(
        "config", nargs="?", help="YAML run configuration, e.g. configs/transformer.yaml"
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its latest checkpoint (no CONFIG)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set train.max_minutes=5 --set out_dir=runs/x "
        "(with --resume: train.* settings only)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an out_dir that already holds a run (its outputs are removed)",
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
    from qkv.presets import config_path
    from qkv.tasks.run_config import load_run_config
    from qkv.tasks.run_dir import WEIGHTS_FILE, resume_config
    from qkv.tasks.run_skeleton import TrainingRun
    from qkv.training.distributed import from_environment, shutdown
    from qkv.training.trainer import training_device

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if (args.config is None) == (args.resume is None):
        raise ValueError("give a CONFIG to start a run, or --resume RUN_DIR to continue one")
    if args.resume and args.overwrite:
        raise ValueError("--overwrite starts a run afresh; it cannot be combined with --resume")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    if args.resume:
        config = resume_config(args.resume, args.overrides)
    else:
        config = load_run_config(config_path(args.config), args.overrides)
    # torchrun: join the process group (NCCL when training on CUDA); otherwise one process.
    device = training_device(config.train)  # resolved once: the backend and the run use it
    distributed = from_environment(device)
    say = print if distributed.main else (lambda *a, **k: None)
    verb = "resuming" if args.resume else "training"
    where = f"{config.out_dir}" + (
        f" on {distributed.world} processes" if distributed.world > 1 else ""
    )
    budget = f"{config.train.max_steps:,} steps"
    if config.train.max_minutes is not None:
        clock = "" if config.train.clock == "wall" else " of CPU time"
        budget += f" or {config.train.max_minutes:g} minutes{clock}, whichever comes first"
    say(f"{verb} {config.name} ({config.family}) in {where}: {budget}")
    try:
        # The CLI builds the run (the task looked up and the device resolved once, the run
        # directory claimed); the task's train(run) adds its data, model, loss and evaluation.
        run = TrainingRun(config, resume=args.resume is not None, overwrite=args.overwrite,
                          distributed=distributed, progress=not args.quiet,
                          handle_signals=True, device=device)  # fmt: skip
        trained = run.spec.train(run)
    finally:
        shutdown()
    if not distributed.main:
        return 0
    result = trained.result
    clock = "" if config.train.clock == "wall" else f" ({result.clock_seconds / 60:.1f} CPU min)"
    print(
        f"stopped after {result.steps} steps, {result.seconds / 60:.1f} min{clock} "
        f"({result.stopped}); {trained.parameters:,} parameters"
    )
    if result.best is not None:
        best = ", ".join(f"{k} {v:.4g}" for k, v in result.best.items() if k != "step")
        print(f"best at step {result.best['step']}: {best}")
    if (trained.model_dir / WEIGHTS_FILE).is_file():
        print(f"model saved in {trained.model_dir}")
    else:
        print(f"no model saved in {trained.model_dir}: the run stopped before its first evaluation")
    if result.signal is not None:
        if result.checkpoint is not None:
            print(
                f"{result.signal} received: the run stopped after step {result.steps} and saved "
                f"a checkpoint; continue it with: qkv train --resume {trained.model_dir}"
            )
        else:
            print(f"{result.signal} received: the run stopped after step {result.steps}")
        return 128 + getattr(signal, result.signal)
    return 0

"""``qkv demo``: print what :func:`qkv.studies.score_functions.run_demo` measured."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qkv.studies.score_functions import DemoReport


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the attention core's demonstration (also `qkv study scores`): every score "
        "function's learned alignment and the fused path's speed",
        description="Train each score function on a known alignment task, print the alignment "
        "matrices and accuracies, and time fused multi-head attention against the naive version.",
    )
    parser.add_argument("--no-speed", action="store_true", help="skip the timing comparison")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.studies.score_functions import run_demo

    print(format_report(run_demo(with_speed=not args.no_speed, seed=args.seed)))
    return 0


def format_report(report: DemoReport) -> str:
    lines = [
        "Each query is a noisy copy of one source vector (shuffled order). Rows: queries; columns:",
        "source positions; [x] marks the source the query should attend to. Location sees only",
        "the query, never the source content, so it cannot do better than chance here.",
        "",
    ]
    for result in report.alignments:
        trained = f"trained {result.train_steps} steps" if result.train_steps else "no parameters"
        chance = 1 / result.weights.size(-1)
        lines.append(
            f"{result.name} ({trained}): held-out alignment accuracy {result.accuracy:.1%} "
            f"(chance {chance:.1%})"
        )
        for row, target in zip(result.weights.tolist(), result.target.tolist(), strict=True):
            cells = [f"[{w:.2f}]" if j == target else f" {w:.2f} " for j, w in enumerate(row)]
            lines.append("    " + "".join(cells))
        lines.append("")
    if report.speed is not None:
        s = report.speed
        lines.append(
            f"Multi-head attention, 1 x {s.length} tokens, {s.heads} heads of {s.head_dim}, "
            "key padding, forward+backward (median):"
        )
        lines.append(f"    qkv (fused SDPA path)      {s.qkv_seconds * 1e3:8.1f} ms")
        lines.append(f"    naive (full matrix)        {s.naive_seconds * 1e3:8.1f} ms")
        lines.append(f"    speed-up                   {s.naive_seconds / s.qkv_seconds:8.2f}x")
    return "\n".join(lines)

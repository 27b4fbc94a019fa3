"""Entry point of the ``qkv`` command: one subcommand per module in this package.

Bad input (a ``ValueError`` from the library, a missing file) is reported as one line on stderr
with exit code 2, never as a traceback; a library warning (an input longer than the model was
trained on, say) as one ``qkv COMMAND: warning: ...`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

from qkv import __version__
from qkv.cli import (
    answer,
    classify,
    configs,
    demo,
    embed,
    evaluate,
    export,
    generate,
    plot_attention,
    plot_curves,
    serve,
    study,
    summarize,
    train,
    translate,
    vision,
)
from qkv.cli.inputs import warnings_to_stderr


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qkv", description="Attention mechanisms and the models built on them."
    )
    parser.add_argument("--version", action="version", version=f"qkv {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (
        train,
        translate,
        generate,
        classify,
        answer,
        summarize,
        vision,
        embed,
        evaluate,
        export,
        plot_attention,
        plot_curves,
        serve,
        study,
        demo,
        configs,
    ):
        command.add_parser(subparsers)
    return parser


def _messages_beside(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """With ``-o -`` (or ``/dev/stdout``) standard output carries the written file alone: the
    command's own lines go to standard error."""
    from qkv.io import STREAMS

    if STREAMS.get(str(getattr(args, "output", None))) == 1:
        return contextlib.redirect_stdout(sys.stderr)
    return contextlib.nullcontext()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    try:
        with warnings_to_stderr(args.command), _messages_beside(args):
            return args.run(args)
    except ModuleNotFoundError as error:
        if "pip install" in str(error):  # qkv's own message names the extra to install
            print(f"qkv {args.command}: error: {error}", file=sys.stderr)
            return 2
        print(
            f"qkv {args.command}: error: this command needs the package {error.name!r}; "
            "install the extras with: pip install 'qkv[all]'",
            file=sys.stderr,
        )
        return 2
    except (ValueError, OSError) as error:
        print(f"qkv {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"qkv {args.command}: interrupted", file=sys.stderr)
        return 130

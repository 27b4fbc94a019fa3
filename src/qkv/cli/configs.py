"""``qkv configs``: the run configurations shipped with qkv, for ``qkv train NAME``."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "configs",
        help="list the packaged run configurations (qkv train NAME)",
        description="List the YAML run configurations that ship with qkv, each with the first "
        "line of its comment. Train one with `qkv train NAME [--set KEY=VALUE ...]`, or copy "
        "its file (--paths) to edit it.",
    )
    parser.add_argument(
        "--paths", action="store_true", help="show each configuration's file instead"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.presets import presets

    found = presets()
    width = max((len(p.name) for p in found), default=0)
    for preset in found:
        about = preset.path if args.paths else preset.description
        print(f"{preset.name:<{width}}  {about}".rstrip())
    return 0

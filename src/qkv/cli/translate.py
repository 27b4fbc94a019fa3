"""``qkv translate --model DIR [TEXT ...]``: translate arguments, or stdin line by line."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator

from qkv.cli.inputs import STDIN, read_lines
from qkv.cli.serving_options import add_precision, chosen_precision

CHUNK = 256  # lines of stdin translated together


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "translate",
        help="translate text with a trained model",
        description="Translate each TEXT argument, or each line of standard input (UTF-8) when "
        "none is given, and print one translation per line. A sentence longer than the model "
        "was trained on is translated with a warning on stderr; one far longer is an error.",
    )
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("text", nargs="*", help="sentences to translate (default: stdin)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="sentences per batch (default: the model's)"
    )
    parser.add_argument(
        "--progress", action="store_true", help="show sentences done and their rate on stderr"
    )
    add_precision(parser)
    parser.set_defaults(run=run)


def _chunks(lines: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run(args: argparse.Namespace) -> int:
    from qkv.tasks.translation import Translator

    translator = Translator.load(args.model, precision=chosen_precision(args) or "float32")
    chunks = [args.text] if args.text else _chunks(read_lines(STDIN))
    bar = None
    if args.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(args.text) or None, desc="translate", unit="sent", dynamic_ncols=True)
    try:
        for chunk in chunks:
            for translation in translator.translate(
                chunk, beam_size=args.beam, batch_size=args.batch_size
            ):
                print(translation.text, flush=True)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return 0

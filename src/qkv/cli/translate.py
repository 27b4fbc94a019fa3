"""``qkv translate --model DIR [TEXT ...]``: translate arguments, or stdin line by line."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Iterator

from qkv.cli.inputs import STDIN, read_lines
from qkv.cli.serving_options import add_engine, add_precision, chosen_precision, compute_type

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
    parser.add_argument(
        "--patience",
        type=float,
        default=None,
        metavar="P",
        help="beam search stops a sentence once P x beam hypotheses have finished (1: "
        "CTranslate2's rule, fewer steps); default: the model's decode.patience, else the exact "
        "search (qkv engine only)",
    )
    add_precision(parser)
    add_engine(parser)
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


def _translator(args: argparse.Namespace) -> Callable[[list[str]], list[str]]:
    """The engine's translation of a list of texts."""
    precision = chosen_precision(args)
    options = {"beam_size": args.beam, "batch_size": args.batch_size}
    if args.engine == "ctranslate2":
        from qkv.ctranslate2.engine import CTranslate2Translator

        if args.patience is not None:
            raise ValueError("--patience is a setting of the qkv engine; drop it or --engine")

        engine = CTranslate2Translator.load(args.model, compute_type=compute_type(precision))
        return lambda texts: engine.translate(texts, **options)
    from qkv.tasks.translation.runner import Translator

    translator = Translator.load(args.model, precision=precision or "float32")
    if args.patience is not None:
        translator.decode = dataclasses.replace(translator.decode, patience=args.patience)
    return lambda texts: [t.text for t in translator.translate(texts, **options)]


def run(args: argparse.Namespace) -> int:
    translate = _translator(args)
    chunks = [args.text] if args.text else _chunks(read_lines(STDIN))
    bar = None
    if args.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(args.text) or None, desc="translate", unit="sent", dynamic_ncols=True)
    try:
        for chunk in chunks:
            for text in translate(chunk):
                print(text, flush=True)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return 0

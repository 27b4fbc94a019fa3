"""``qkv export --format ctranslate2 --model DIR -o OUT [--quantization int8]``: a trained model
directory as a CTranslate2 model directory (:func:`qkv.ctranslate2.export.export_model`)."""

from __future__ import annotations

import argparse

FORMATS = ("ctranslate2",)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a trained model as a CTranslate2 model",
        description="Write the trained model in DIR as a CTranslate2 model directory OUT: "
        "model.bin, CTranslate2's config.json and vocabularies, and qkv's tokenizers and run "
        "configuration under OUT/qkv, so that OUT alone translates or generates (with "
        "qkv.ctranslate2.engine, or with ctranslate2 itself on qkv's tokens). Translation "
        "Transformers and language models export; recurrent and copying models are refused, "
        "as is any other task's model. OUT is written whole or not at all; an existing "
        "non-empty OUT is refused unless --overwrite.",
    )
    parser.add_argument("--format", required=True, choices=FORMATS, help="ctranslate2")
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    parser.add_argument(
        "--quantization",
        default=None,
        metavar="TYPE",
        help="int8 or int8_float32 (8-bit weights, about a quarter of the float32 size) or "
        "int16; default: float32 weights (which CTranslate2 can still run as int8, with "
        "compute_type)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.ctranslate2.export import export_model

    exported = export_model(
        args.model,
        args.output,
        format=args.format,
        quantization=args.quantization,
        overwrite=args.overwrite,
    )
    weights = exported.quantization or "float32"
    print(f"exported {args.model} to {exported.out} (CTranslate2, {weights} weights):")
    for name in exported.files:
        print(f"  {exported.out / name}")
    return 0

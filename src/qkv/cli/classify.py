"""``qkv classify --model DIR TEXT...`` and ``qkv tag --model DIR TEXT...``: run a trained
classifier or tagger on text."""

from __future__ import annotations

import argparse
import json

from qkv.cli.inputs import read_lines


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    classify = subparsers.add_parser(
        "classify",
        help="label texts with a trained classifier",
        description="Print the label of each TEXT (or of each line of --file) with its "
        "probability; --json prints every label's probability as JSON lines.",
    )
    _common(classify)
    classify.set_defaults(run=run_classify)
    tag = subparsers.add_parser(
        "tag",
        help="tag the words of texts with a trained tagger or entity tagger",
        description="Split each TEXT (or each line of --file) into words and punctuation as "
        "the model's training corpus was (its data.splitter: tweets keeps @mentions, #hashtags "
        "and links whole) and tag them. --format: words (word/TAG), conll (word<TAB>TAG lines, "
        "a blank line after each text), json (JSON lines: [word, tag] pairs; an entity "
        "tagger's also give the text and its entities), spans (entity taggers: the text with "
        "each entity bracketed and typed, [New York](geo-loc)). Default: spans for an entity "
        "tagger, else words; --json is --format json.",
    )
    _common(tag)
    tag.add_argument("--format", choices=("spans", "words", "conll", "json"))
    tag.set_defaults(run=run_tag)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("texts", nargs="*", metavar="TEXT")
    parser.add_argument(
        "--file", help="read one text per line, UTF-8 ('-': standard input); blank lines skipped"
    )
    parser.add_argument("--json", action="store_true", help="JSON lines output")


def _texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.texts)
    if args.file is not None:
        texts.extend(line for line in read_lines(args.file) if line.strip())
    if not texts:
        raise ValueError("give at least one TEXT, or --file with one text per line")
    return texts


def run_classify(args: argparse.Namespace) -> int:
    from qkv.tasks.classification.runner import Classifier

    texts = _texts(args)
    classifier = Classifier.load(args.model)
    predictions = classifier.predict(texts)
    for text, prediction in zip(texts, predictions, strict=True):
        if args.json:
            row = {"text": text, "label": prediction.label, **prediction.probabilities}
            print(json.dumps(row, ensure_ascii=False))
        else:
            probability = prediction.probabilities[prediction.label]
            print(f"{prediction.label}\t{probability:.3f}\t{text}")
    return 0


def run_tag(args: argparse.Namespace) -> int:
    from qkv.tasks.run_dir import load_runner

    if args.json and args.format not in (None, "json"):
        raise ValueError(f"--json is --format json; it cannot go with --format {args.format}")
    texts = _texts(args)
    spec, tagger = load_runner(args.model)
    if not hasattr(tagger, "render"):
        raise ValueError(
            f"{args.model} holds a {spec.name} model, not a tagging model (qkv tag runs "
            "part-of-speech and entity taggers)"
        )
    for line in tagger.render(texts, "json" if args.json else args.format):
        print(line)
    return 0

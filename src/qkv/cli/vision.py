"""``qkv classify-image --model DIR IMAGE...`` and ``qkv caption --model DIR IMAGE...``: run a
trained Vision Transformer or captioner on image files."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    classify = subparsers.add_parser(
        "classify-image",
        help="classify image files with a trained Vision Transformer",
        description="Print the class of each IMAGE (PNG or JPEG) with its probability and the "
        "runners-up; images are converted to the model's channels and resized to its training "
        "size. --json prints every class's probability as JSON lines.",
    )
    classify.add_argument("--model", required=True, help="trained model directory")
    classify.add_argument("images", nargs="+", metavar="IMAGE")
    classify.add_argument("--top", type=int, default=3, help="classes to show per image")
    classify.add_argument("--json", action="store_true", help="JSON lines output")
    classify.set_defaults(run=run_classify_image)


def run_classify_image(args: argparse.Namespace) -> int:
    from qkv.tasks.image_classification import ImageClassifier

    if args.top < 1:
        raise ValueError(f"--top must be >= 1, got {args.top}")
    classifier = ImageClassifier.load(args.model)
    predictions = classifier.predict(classifier.read_images(args.images))
    for path, prediction in zip(args.images, predictions, strict=True):
        if args.json:
            print(
                json.dumps({"image": path, "label": prediction.label, **prediction.probabilities})
            )
            continue
        ranked = sorted(prediction.probabilities.items(), key=lambda kv: -kv[1])[: args.top]
        shown = "  ".join(f"{label} {p:.3f}" for label, p in ranked)
        print(f"{prediction.label}\t{path}\t{shown}")
    return 0

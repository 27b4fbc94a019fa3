"""``qkv classify-image --model DIR IMAGE...`` and ``qkv caption --model DIR IMAGE...``: run a
trained Vision Transformer or captioner on image files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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
    caption = subparsers.add_parser(
        "caption",
        help="caption strips of images with a trained Show-Attend-Tell model",
        description="Print the caption of each IMAGE: a strip of tiles side by side, each tile "
        "of the size the model was trained on (e.g. 28x28 digits: a 28 x 84 PNG holds three). "
        "--test-strips N captions N held-out strips of the model's data set instead and shows "
        "their reference captions; --save-strips DIR writes them as PNG files to caption again. "
        "Captions are greedy unless --beam N asks for the most probable caption a beam of N "
        "finds.",
    )
    caption.add_argument("--model", required=True, help="trained model directory")
    caption.add_argument("images", nargs="*", metavar="IMAGE")
    caption.add_argument(
        "--test-strips", type=int, default=0, metavar="N", help="caption N held-out test strips"
    )
    caption.add_argument("--save-strips", metavar="DIR", help="write the test strips as PNG files")
    caption.add_argument(
        "--beam", type=int, default=None, metavar="N", help="beam size (default: 1, greedy)"
    )
    caption.add_argument("--json", action="store_true", help="JSON lines output")
    caption.set_defaults(run=run_caption)


def run_classify_image(args: argparse.Namespace) -> int:
    from qkv.tasks.image_classification.runner import ImageClassifier

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


def run_caption(args: argparse.Namespace) -> int:
    from qkv.data.images.datasets import read_image
    from qkv.tasks.captioning.runner import Captioner, check_beam

    if args.test_strips < 0:
        raise ValueError(f"--test-strips must be >= 0, got {args.test_strips}")
    if not args.images and not args.test_strips:
        raise ValueError("give at least one IMAGE, or --test-strips N")
    if args.save_strips and not args.test_strips:
        raise ValueError("--save-strips writes the strips of --test-strips N; give N")
    check_beam(args.beam)  # before the model loads
    captioner = Captioner.load(args.model)
    channels = captioner.tile_shape[0]
    names = list(args.images)
    images = [read_image(path, channels=channels) for path in names]
    references: list[str | None] = [None] * len(images)
    if args.test_strips:
        strips = captioner.test_strips(args.test_strips)
        for index in range(len(strips)):
            images.append(strips.strip(index))
            references.append(" ".join(captioner.vocab.decode(strips.caption(index))))
            names.append(f"test strip {index}")
        if args.save_strips:
            from qkv.viz.image_attention import save_image

            folder = Path(args.save_strips)
            for index in range(len(strips)):
                path = folder / f"strip-{index}.png"
                save_image(strips.strip(index), path)
                names[len(args.images) + index] = str(path)
    captions = captioner.caption(images, names, beam_size=args.beam)
    for name, caption, reference in zip(names, captions, references, strict=True):
        text = " ".join(caption.words)
        if args.json:
            row = {"image": name, "caption": text}
            if reference is not None:
                row["reference"] = reference
            print(json.dumps(row))
        elif reference is None:
            print(f"{text}\t{name}")
        else:
            mark = "=" if text == reference else "x"
            print(f"{text}\t{mark} {reference}\t{name}")
    return 0

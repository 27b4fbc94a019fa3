"""``qkv evaluate --model DIR [--split test]``: BLEU, chrF and BLEU by source length for a
translation model; perplexity and bits per character for a language model; accuracy and
macro-F1 for a classifier or an image classifier; token accuracy for a tagger; exact match, BLEU
and alignment accuracy for a captioner."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score a trained model on a split of its corpus",
        description="Translation models: translate a split of the model's corpus and print "
        "sacrebleu BLEU and chrF (with signatures), BLEU by source length, and example "
        "translations. Language models: perplexity and bits per character on the split. "
        "Classifiers: accuracy, macro-F1 and per-label scores. Taggers: token accuracy, also "
        "on words unseen in training. Image classifiers: accuracy, macro-F1 and per-class scores. "
        "Captioners: exact caption match, BLEU and alignment accuracy on held-out strips. "
        "A translation model's scores on a whole split are also recorded in its results.json "
        "(unless --no-save); when that file cannot be written the scores are printed all the "
        "same, followed by an error saying so, and the exit code is 2.",
    )
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--split", default="test", choices=["train", "valid", "test"])
    parser.add_argument(
        "--limit", type=int, default=None, help="first N sentences (or tokens) only"
    )
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("--examples", type=int, default=5, help="example translations to show")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="sentences per batch (default: the model's)"
    )
    parser.add_argument(
        "--no-save",
        action="store_true",
        help="print the scores only: do not record them in the model's results.json (for a "
        "read-only model directory)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.tasks.run_dir import model_task
    from qkv.tasks.translation import evaluate_translation, save_translation_results

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be >= 1, got {args.limit}")
    if args.examples < 0:
        raise ValueError(f"--examples must be >= 0, got {args.examples}")
    task = model_task(args.model)
    if task == "language_model":
        return run_language_model(args)
    if task == "classification":
        return run_classifier(args)
    if task == "tagging":
        return run_tagger(args)
    if task == "image_classification":
        return run_image_classifier(args)
    if task == "captioning":
        return run_captioner(args)
    report = evaluate_translation(
        args.model,
        split=args.split,
        limit=args.limit,
        beam_size=args.beam,
        batch_size=args.batch_size,
        progress=not args.quiet,
        save=False,  # printed first, then recorded: a read-only directory loses no scores
    )
    s = report.scores
    print(f"{report.split}: {s.sentences} sentences, beam {report.beam_size}")
    print(f"BLEU {s.bleu:.2f}  ({s.bleu_signature})")
    print(f"chrF {s.chrf:.2f}  ({s.chrf_signature})")
    print(f"exact match {report.exact_match:.1%}")
    print(
        "BLEU by source length (words): "
        + ", ".join(f"{b.label}: {b.bleu:.1f} (n={b.sentences})" for b in report.buckets)
    )
    for source, hypothesis, reference in report.examples[: args.examples]:
        print(f"\n  source     {source}\n  qkv        {hypothesis}\n  reference  {reference}")
    if args.no_save or args.limit is not None:  # scores on the first N are not the split's
        return 0
    try:
        save_translation_results(args.model, report)
    except (OSError, ValueError) as error:  # read-only, full, or a corrupt results.json
        print(
            f"qkv evaluate: error: the scores above were not recorded in results.json: {error} "
            "(pass --no-save to print them only)",
            file=sys.stderr,
        )
        return 2
    return 0


def run_language_model(args: argparse.Namespace) -> int:
    from qkv.tasks.language_model import LanguageModel

    result = LanguageModel.load(args.model).evaluate(args.split, max_tokens=args.limit)
    print(f"{result.split}: {result.tokens:,} tokens ({result.chars:,} characters)")
    print(f"loss {result.loss:.4f} nats/token, perplexity {result.perplexity:.3f}")
    print(f"bits per character {result.bits_per_char:.4f}")
    return 0


def run_classifier(args: argparse.Namespace) -> int:
    from qkv.tasks.classification import Classifier

    return _print_classification(Classifier.load(args.model).evaluate(args.split))


def run_image_classifier(args: argparse.Namespace) -> int:
    from qkv.tasks.image_classification import ImageClassifier

    return _print_classification(ImageClassifier.load(args.model).evaluate(args.split))


def run_captioner(args: argparse.Namespace) -> int:
    from qkv.tasks.captioning import Captioner

    if args.split == "train":
        raise ValueError("a captioner is scored on its held-out strips: --split valid or test")
    result = Captioner.load(args.model).evaluate(args.split)
    print(f"{result['split']}: {result['strips']:,} strips, {result['words']:,} words")
    print(f"exact match {result['exact_match']:.4f}  BLEU {result['bleu']:.2f}")
    print(f"alignment accuracy {result['alignment_accuracy']:.4f}")
    return 0


def _print_classification(result) -> int:
    print(f"{result.split}: {result.examples:,} examples")
    print(f"accuracy {result.accuracy:.4f}  macro-F1 {result.macro_f1:.4f}")
    for label, scores in result.per_label.items():
        print(
            f"  {label:<12} precision {scores.precision:.3f}  recall {scores.recall:.3f}  "
            f"F1 {scores.f1:.3f}  (n={scores.support})"
        )
    return 0


def run_tagger(args: argparse.Namespace) -> int:
    from qkv.tasks.tagging import Tagger

    result = Tagger.load(args.model).evaluate(args.split)
    print(f"{result.split}: {result.sentences:,} sentences, {result.words:,} words")
    print(f"token accuracy {result.accuracy:.4f}")
    if result.unseen_accuracy is not None:
        print(
            f"on the {result.unseen_words:,} words unseen in training: {result.unseen_accuracy:.4f}"
        )
    return 0

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
        "The scores on a whole split are also recorded in the model's results.json (unless "
        "--no-save); when that file cannot be written the scores are printed all the same, "
        "followed by an error saying so, and the exit code is 2. An option a model's task does "
        "not take is an error naming the task.",
    )
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--split", default="test", choices=["train", "valid", "test"])
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="score the first N items of the split only (sentences, examples, images, strips; "
        "tokens for a language model); such scores are not recorded",
    )
    parser.add_argument(
        "--beam",
        type=int,
        default=None,
        help="translation and captioning: beam size (default: the model's; greedy for a captioner)",
    )
    parser.add_argument(
        "--examples", type=int, default=None, help="translation: example translations to show (5)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="translation: sentences per batch (default: the model's)",
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
    from qkv.tasks.run_dir import model_task, save_results
    from qkv.tasks.spec import EvaluateOptions

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be >= 1, got {args.limit}")
    if args.examples is not None and args.examples < 0:
        raise ValueError(f"--examples must be >= 0, got {args.examples}")
    spec = model_task(args.model)
    given = {"beam": args.beam, "examples": args.examples, "batch_size": args.batch_size}
    spec.check_options("evaluate", [k for k, v in given.items() if v is not None], "evaluate")
    if args.split not in spec.splits:
        raise ValueError(
            f"a {spec.label} is scored on its {' and '.join(spec.splits)} splits: "
            f"--split {' or '.join(spec.splits)}"
        )
    options = EvaluateOptions(
        beam=args.beam, batch_size=args.batch_size, examples=args.examples, progress=not args.quiet
    )
    report = spec.load(args.model).report(args.split, limit=args.limit, options=options)
    for line in report.lines:  # printed first, then recorded: a read-only directory loses none
        print(line)
    if args.no_save or not report.complete:  # scores on the first N are not the split's
        return 0
    try:
        save_results(args.model, report.split, report.record)
    except (OSError, ValueError) as error:  # read-only, full, or a corrupt results.json
        print(
            f"qkv evaluate: error: the scores above were not recorded in results.json: {error} "
            "(pass --no-save to print them only)",
            file=sys.stderr,
        )
        return 2
    return 0

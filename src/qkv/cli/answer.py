"""``qkv answer --model DIR --context FILE "QUESTION"`` (or ``--squad FILE``): answer questions
about a passage with a trained reader."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "answer",
        help="answer questions about a passage with a trained reader",
        description="Answer each QUESTION about the passage in --context FILE and print the "
        "answer, the model's probability of it (a span reader's: P(start) x P(end)) and the "
        "passage with the answer in [[...]] and the most-attended words followed by their "
        "weight (a span reader's likeliest first and last words, by P(start) and P(end)). A "
        "cloze reader's question marks the "
        "missing word with XXXXX; its candidates are --candidates, or the passage's words "
        "of the kind it was trained on (names: capitalised words that do not start a sentence; "
        "common nouns). With --squad FILE (SQuAD v1.1 JSON) every question of "
        "the file is answered: one line per question (id, answer, probability), the official "
        "exact match and F1 when the file has answers, and -o writes the predictions as the "
        "official script reads them ({id: answer}).",
    )
    parser.add_argument("--model", required=True, help="trained reader directory")
    parser.add_argument("questions", nargs="*", metavar="QUESTION")
    parser.add_argument("--context", help="the passage, a UTF-8 text file")
    parser.add_argument("--squad", help="a SQuAD v1.1 JSON file of questions")
    parser.add_argument(
        "--candidates",
        help="cloze readers only: candidate words, comma-separated (a span reader refuses them)",
    )
    parser.add_argument("-o", "--output", help="--squad: write the predictions to this JSON file")
    parser.add_argument("--json", action="store_true", help="JSON lines output")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.data.errors import decode_utf8
    from qkv.data.reading.squad import read_squad
    from qkv.io import atomic_write_json, check_output_file
    from qkv.tasks.reading.runner import Reader
    from qkv.tasks.run_dir import load_runner

    if (args.squad is None) == (args.context is None):
        raise ValueError("give --context FILE with QUESTION(s), or --squad FILE")
    if args.squad is not None and (args.questions or args.candidates):
        raise ValueError("--squad answers the file's own questions: drop QUESTION/--candidates")
    if args.context is not None and not args.questions:
        raise ValueError("give at least one QUESTION about the --context passage")
    if args.output is not None and args.squad is None:
        raise ValueError("-o writes the predictions of --squad")
    if args.output is not None:
        check_output_file(args.output)
    squad = read_squad(args.squad) if args.squad is not None else None
    if args.context is not None:
        path = Path(args.context)
        passage = decode_utf8(path, path.read_bytes())
    spec, reader = load_runner(args.model)
    if not isinstance(reader, Reader):
        raise ValueError(f"{args.model} holds a {spec.name} model, not a reader")
    if squad is not None:
        answers, scores = reader.answer_squad(squad)
        for question, answer in zip(squad, answers, strict=True):
            if args.json:
                row = {"id": question.id, **answer.output()}
                print(json.dumps(row, ensure_ascii=False))
            else:
                print(f"{question.id}\t{answer.text}\t{answer.probability:.3f}")
        if scores is not None:
            print(
                f"{scores.questions:,} questions: exact match {100 * scores.exact_match:.2f}  "
                f"F1 {100 * scores.f1:.2f}"
            )
        if args.output is not None:
            predictions = {q.id: a.text for q, a in zip(squad, answers, strict=True)}
            atomic_write_json(args.output, predictions)
            print(f"wrote {args.output}")
        return 0
    candidates = None
    if args.candidates is not None:
        candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    examples = [reader.example(q, passage, candidates) for q in args.questions]
    for question, answer in zip(args.questions, reader.run(examples), strict=True):
        if args.json:
            print(json.dumps({"question": question, **answer.output()}, ensure_ascii=False))
        else:
            print(f"{answer.text}\t{answer.probability:.3f}\t{question}")
            print(f"  {answer.marked()}")
    return 0

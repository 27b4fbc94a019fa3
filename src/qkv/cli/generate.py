"""``qkv generate --model DIR "prompt"``: continue text with a trained language model, streaming
it as it is produced."""

from __future__ import annotations

import argparse
import dataclasses
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate text with a trained language model",
        description="Continue each prompt with a trained language model (greedy with "
        "--temperature 0, else sampled with top-k/top-p). One prompt streams its text as it is "
        "produced; several are generated as one batch. Settings default to the model's decode "
        "section.",
    )
    parser.add_argument("--model", required=True, help="trained language-model directory")
    parser.add_argument("prompts", nargs="*", help="prompt text (none: start from a newline)")
    parser.add_argument("--max-new-tokens", type=int, default=None, metavar="N")
    parser.add_argument("--temperature", type=float, default=None, help="0: greedy")
    parser.add_argument("--top-k", type=int, default=None, metavar="K")
    parser.add_argument("--top-p", type=float, default=None, metavar="P")
    parser.add_argument("--repetition-penalty", type=float, default=None, metavar="R")
    parser.add_argument("--seed", type=int, default=None, help="the same seed, the same text")
    parser.add_argument(
        "--stop", action="append", default=[], metavar="TEXT", help="end at this text (repeatable)"
    )
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 weights and cache for the decode steps (faster; tokens may differ "
        "where two are nearly tied)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.tasks.language_model import LanguageModel

    lm = LanguageModel.load(args.model)
    chosen = {
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "repetition_penalty": args.repetition_penalty,
        "seed": args.seed,
    }
    sampling = dataclasses.replace(
        lm.config.decode, **{k: v for k, v in chosen.items() if v is not None}
    )
    import torch

    dtype = torch.bfloat16 if args.bf16 else None
    prompts = args.prompts or [""]
    if len(prompts) == 1:

        def stream(row: int, text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        sys.stdout.write(prompts[0])
        lm.generate(prompts, sampling, stop=args.stop, on_text=stream, weights_dtype=dtype)
        sys.stdout.write("\n")
        return 0
    texts = lm.generate(prompts, sampling, stop=args.stop, weights_dtype=dtype)
    for prompt, text in zip(prompts, texts, strict=True):
        print(f"{prompt}{text}")
        print("---")
    return 0

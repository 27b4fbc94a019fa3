"""``qkv generate --model DIR "prompt"``: continue text with a trained language model, streaming
it as it is produced."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from qkv.cli.serving_options import add_engine, add_precision, chosen_precision, compute_type


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
    add_precision(parser, bf16_alias=True)
    add_engine(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qkv.decoding.sampling import SamplingConfig
    from qkv.tasks.language_model.runner import LanguageModel

    if "" in args.stop:
        raise ValueError("--stop '' would stop before any text; give the text to stop at")
    chosen = {
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "repetition_penalty": args.repetition_penalty,
        "seed": args.seed,
    }
    given = {k: v for k, v in chosen.items() if v is not None}
    SamplingConfig(**given)  # the ranges of the flags given, checked before the model loads
    if args.engine == "ctranslate2":
        return _generate_ctranslate2(args, given)
    lm = LanguageModel.load(args.model)
    sampling = dataclasses.replace(lm.config.decode, **given)
    precision = chosen_precision(args)
    prompts = args.prompts or [""]
    return _generate(lm, prompts, sampling, args.stop, precision)


def _generate_ctranslate2(args: argparse.Namespace, given: dict) -> int:
    """Greedy continuations by CTranslate2 (``--engine ctranslate2``), stop strings cut off."""
    from qkv.ctranslate2.engine import CTranslate2Generator

    engine = CTranslate2Generator.load(
        args.model, compute_type=compute_type(chosen_precision(args))
    )
    sampling = dataclasses.replace(engine.sampling, **given)
    if sampling.temperature != 0 or sampling.repetition_penalty != 1:
        raise ValueError(
            "--engine ctranslate2 generates greedily, without a repetition penalty; the flags or "
            f"the model's decode section ask for temperature {sampling.temperature} and "
            f"repetition penalty {sampling.repetition_penalty}: pass --temperature 0 "
            "--repetition-penalty 1, or use --engine qkv"
        )
    prompts = args.prompts or [""]
    texts = engine.generate(prompts, max_new_tokens=sampling.max_new_tokens)
    for prompt, text in zip(prompts, texts, strict=True):
        for marker in args.stop:
            cut = text.find(marker)
            text = text if cut < 0 else text[:cut]
        print(f"{prompt}{text}")
        if len(prompts) > 1:
            print("---")
    return 0


def _generate(lm, prompts: list[str], sampling, stop: list[str], precision) -> int:
    if len(prompts) == 1:
        # The prompt is echoed with the first new text, so that an error or a warning about
        # it (raised before generation starts) comes first.
        pending = [prompts[0]]

        def stream(row: int, text: str) -> None:
            sys.stdout.write("".join(pending) + text)
            sys.stdout.flush()
            pending.clear()

        lm.generate(prompts, sampling, stop=stop, on_text=stream, precision=precision)
        sys.stdout.write("".join(pending) + "\n")
        return 0
    texts = lm.generate(prompts, sampling, stop=stop, precision=precision)
    for prompt, text in zip(prompts, texts, strict=True):
        print(f"{prompt}{text}")
        print("---")
    return 0

"""``qkv summarize --model DIR [TEXT ...] [--file PATH ...]`` and ``qkv reply --model DIR
"TURN" ["TURN" ...]``: a trained summariser's summaries, a dialogue model's reply."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from qkv.cli.inputs import STDIN, check_stdin_once, read_lines

if TYPE_CHECKING:
    from qkv.tasks.summarisation.runner import TextToText


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    summarize = subparsers.add_parser(
        "summarize",
        help="summarise texts (or code) with a trained summariser",
        description="Print one summary per input: each TEXT argument, then each --file (its "
        "whole content is one text; - reads standard input); with neither, standard input is "
        "one text. An input longer than the model was trained on is read whole, with a "
        "warning on stderr; one far longer is an error. A pointer-generator's copied words "
        "(out of its vocabulary) are shown with --json, with p_gen at each word.",
    )
    summarize.add_argument("texts", nargs="*", metavar="TEXT")
    summarize.add_argument("--file", action="append", default=[], metavar="PATH",
                           help="a UTF-8 file to summarise as one text (repeatable)")  # fmt: skip
    _common(summarize)
    summarize.set_defaults(run=run_summarize)
    reply = subparsers.add_parser(
        "reply",
        help="the next turn of a dialogue, from a trained dialogue model",
        description="Print the model's reply to the dialogue so far: the TURN arguments, "
        "oldest first (a model trained on one previous turn reads the last one best).",
    )
    reply.add_argument("turns", nargs="+", metavar="TURN")
    _common(reply)
    reply.set_defaults(run=run_reply)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON line per output: text, words, copied, p_gen")  # fmt: skip


def _load(model: str, kind: type[TextToText]) -> Any:
    from qkv.tasks.run_dir import load_runner

    spec, runner = load_runner(model)
    if not isinstance(runner, kind):
        raise ValueError(f"{model} holds a {spec.label}, not a {kind.noun} model")
    return runner


def _print(runner: Any, texts: list[str], beam: int | None, as_json: bool) -> None:
    if not as_json:
        for response in runner.respond(texts, beam_size=beam):
            print(response.text)
        return
    for text in texts:
        seen = runner.views(text, _options(beam))
        print(json.dumps({k: seen.output[k] for k in ("text", "tokens", "copied", "p_gen")},
                         ensure_ascii=False))  # fmt: skip


def _options(beam: int | None):
    from qkv.tasks.spec import ViewOptions

    return ViewOptions(beam=beam)


def run_summarize(args: argparse.Namespace) -> int:
    from qkv.tasks.summarisation.runner import Summariser

    texts = list(args.texts)
    for path in check_stdin_once(args.file) or ([] if texts else [STDIN]):
        texts.append("\n".join(read_lines(path)))
    runner = _load(args.model, Summariser)
    _print(runner, texts, args.beam, args.json)
    return 0


def run_reply(args: argparse.Namespace) -> int:
    from qkv.data.pairs.dialogue import join_turns
    from qkv.tasks.summarisation.runner import Replier

    context = join_turns(args.turns)
    runner = _load(args.model, Replier)
    _print(runner, [context], args.beam, args.json)
    return 0

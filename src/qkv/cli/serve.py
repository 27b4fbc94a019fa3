"""``qkv serve --model DIR [--model DIR ...]``: the attention explorer as a local web page;
``qkv explore --model DIR INPUT -o page.html``: the same view of one input as a single file
(``--compare DIR2``: two models side by side, with their difference)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from qkv.cli.serving_options import add_engine, add_precision, chosen_precision


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve the attention explorer: a page to see what each model attends to",
        description="Load each --model and serve a page where you pick one, give it text (or an "
        "image file for a Vision Transformer or captioner) and see its output and attention: "
        "alignment matrices, every layer and head, token-to-token lines, maps over the image. "
        "The JSON API under the page is POST /api/run (see the README). Binds to 127.0.0.1 "
        "unless --host says otherwise, and answers only requests addressed to 127.0.0.1, "
        "localhost, [::1], --host or an --allow-host name.",
    )
    serve.add_argument(
        "--model", action="append", required=True, metavar="DIR", help="model directory (repeat)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the server answers to besides the loopback ones and --host (repeat); "
        "requests whose Host header names another are refused (421)",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads: PyTorch's, and CTranslate2's per call with --engine ctranslate2 "
        "(default: each one's own choice)",
    )
    add_precision(serve)
    add_engine(serve, models="every --model (one engine runs them all) is")
    _limit_arguments(serve)
    serve.set_defaults(run=run_serve)
    explore = subparsers.add_parser(
        "explore",
        help="write the attention explorer's view of one input as a single HTML file",
        description="Run --model on INPUT (text, or an image file for a Vision Transformer or "
        "captioner) and write the explorer's page for it to -o: one self-contained HTML file "
        "(data, style and script inlined; nothing is loaded from the network when it is "
        "viewed), to attach to a report or share.",
    )
    explore.add_argument("--model", required=True, metavar="DIR", help="model directory")
    explore.add_argument(
        "--compare",
        metavar="DIR2",
        default=None,
        help="a second model directory of the same task (another run, or one of the run's "
        "snapshots/<N>min/): the page shows both side by side with the difference DIR2 - DIR",
    )
    explore.add_argument("input", metavar="INPUT", help="the text, or the image file")
    explore.add_argument("-o", "--output", required=True, help="HTML file to write")
    explore.add_argument(
        "--max-new-tokens", type=int, default=None, help="language models: tokens to generate"
    )
    explore.add_argument(
        "--neuron",
        action="store_true",
        help="qkv Transformers (language model, encoder classifier/taggers, translation, "
        "summarisation and dialogue): add each layer's query and key vectors, for the page's "
        "neuron view (a larger page)",
    )
    explore.add_argument(
        "--rollout",
        action="store_true",
        help="encoder classifier/taggers: add the attention rollout view (and flow, up to 32 "
        "tokens); Vision Transformer: add the [CLS] attention flow map next to its rollout",
    )
    add_engine(explore, models="--model (and --compare) is")
    explore.set_defaults(run=run_explore)


def _limit_arguments(parser: argparse.ArgumentParser) -> None:
    from qkv.explorer.views import Limits

    defaults = Limits()
    parser.add_argument(
        "--max-chars", type=int, default=defaults.max_chars, help="longest text accepted"
    )
    parser.add_argument(
        "--max-image-bytes",
        type=int,
        default=defaults.max_image_bytes,
        help="largest image file accepted",
    )


def run_serve(args: argparse.Namespace) -> int:
    import torch

    from qkv.explorer.app import create_app
    from qkv.explorer.server import bind, is_loopback, serve
    from qkv.explorer.session import ExplorerModels
    from qkv.explorer.views import Limits

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {args.port}")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    limits = Limits(max_chars=args.max_chars, max_image_bytes=args.max_image_bytes)
    models = ExplorerModels.load(
        args.model, precision=chosen_precision(args), engine=args.engine, threads=args.threads
    )
    if not is_loopback(args.host):
        print(
            f"qkv serve: warning: binding to {args.host}: the explorer is reachable from other "
            "machines; it has no authentication (it answers requests addressed to loopback, "
            f"{args.host} or an --allow-host name)",
            file=sys.stderr,
        )
    app = create_app(models, limits, hosts=[args.host, *args.allow_host])
    sock = bind(args.host, args.port)
    port = sock.getsockname()[1]
    names = ", ".join(f"{m.name} ({m.kind})" for m in models)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {names} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops a server: uvicorn has shut down
        serve(app, sock)
    print("stopped")
    return 0


def run_explore(args: argparse.Namespace) -> int:
    from qkv.explorer.compare import compare_models
    from qkv.explorer.page import page_data, render_page
    from qkv.explorer.session import ExplorerModels, ViewExtras
    from qkv.explorer.views import Limits
    from qkv.io import STREAMS, atomic_write, check_output_file

    output = Path(args.output)
    if output.suffix.lower() not in (".html", ".htm") and str(output) not in STREAMS:
        raise ValueError(f"-o must name an .html file (or - for standard output), got {output}")
    check_output_file(output)
    limits = Limits()
    directories = [args.model] + ([args.compare] if args.compare else [])
    models = ExplorerModels.load(directories, engine=args.engine)
    model = next(iter(models))
    given: dict = {"text": args.input, "max_new_tokens": args.max_new_tokens}
    extras = ViewExtras(neuron=args.neuron, rollout=args.rollout)
    if model.takes_image:
        path = Path(args.input)
        if not path.is_file():
            raise ValueError(f"{path}: no such image file (model {model.name} takes an image)")
        given = {"image": path.read_bytes(), "image_name": path.name}
    if args.compare:
        if args.neuron or args.rollout:
            raise ValueError(
                "--neuron and --rollout show one model's views: drop them with --compare"
            )
        compared = compare_models(models, limits=limits, **given)
        page = compared.page()
        for name, out in zip(compared.data["names"], compared.data["outputs"], strict=True):
            print(f"{name}: {out['summary']}")
    else:
        result = model.run(limits=limits, extras=extras, **given)
        page = render_page(page_data("static", models.describe(), limits, result))
        print(result["output"]["summary"])
    atomic_write(output, lambda handle: handle.write(page.encode("utf-8")))
    print(f"wrote {output}")
    return 0

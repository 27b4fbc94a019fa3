"""``qkv plot-attention --model DIR TEXT -o FILE.png``: the alignment of one translation, the
self-attention of a classifier or tagger over one sentence, a Vision Transformer's attention
over an image, or a caption's attention over its image, word by word."""

from __future__ import annotations

import argparse
from pathlib import Path

# Tokens a plot shows per axis: a heatmap grows with them (0.35 inch a token at 120 dpi; a
# plot of 2,000 words asked for gigabytes), and past these labels can no longer be read.
PLOT_MAX_TOKENS = 150
HEADS_MAX_TOKENS = 64  # --heads draws one panel per head
# qkv.viz.figure_file.FORMATS (a test keeps them equal), not imported: building the parser of
# every command (`qkv train` too) would then import qkv.viz.
FORMATS = ("png", "svg", "pdf")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot-attention",
        help="draw the attention of a translation, or of an encoder over a sentence",
        description="Translation models: translate TEXT and draw its cross-attention: for RNN "
        "models the alignment, for Transformers one layer averaged over heads, or every head of "
        "it with --heads. Classifiers and taggers: the token x token self-attention of one "
        "encoder layer over TEXT (averaged over heads, or every head with --heads). Vision "
        "Transformers: the [CLS]-to-patch attention over the image, the rollout over all layers "
        "and each layer's head mean (or every head of --layer with --heads). Captioners: the "
        "attention over the image for each word of the caption. Language models: generate a "
        "continuation (as long as the plot has room for) and draw the causal self-attention. "
        "An option a model's task does not take is an error naming the task.",
    )
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument(
        "text", help="the sentence to translate or encode, or the image file of a vision model"
    )
    parser.add_argument(
        "-o", "--output", required=True,
        help="image file (.png, .svg or .pdf), or - for standard output (PNG unless --format)",
    )  # fmt: skip
    parser.add_argument(
        "--format", choices=FORMATS, default=None,
        help="the file's format (default: -o's suffix); for -o -, or a name without a suffix",
    )  # fmt: skip
    parser.add_argument("--layer", type=int, default=None, help="layer (default: last)")
    parser.add_argument("--heads", action="store_true", help="one panel per head")
    parser.add_argument(
        "--pooling",
        action="store_true",
        help="classifiers: the pooling's weights over the tokens instead (one row per hop of "
        "structured self-attention)",
    )
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.set_defaults(run=run)


def _plot_limit(args: argparse.Namespace) -> int:
    return HEADS_MAX_TOKENS if args.heads else PLOT_MAX_TOKENS


def _check_words(args: argparse.Namespace) -> None:
    """Refuse a TEXT with more words than a plot shows tokens, before running the model."""
    limit = _plot_limit(args)
    if len(args.text.split(maxsplit=limit)) > limit:
        raise ValueError(
            f"TEXT has more than {limit} words; a plot shows at most {limit} tokens per axis"
            f"{' with --heads' if args.heads else ''}: plot a shorter sentence"
        )


def _check_tokens(args: argparse.Namespace, *axes: list[str]) -> None:
    limit, longest = _plot_limit(args), max(len(tokens) for tokens in axes)
    if longest > limit:
        raise ValueError(
            f"the plot would have {longest} tokens on one axis; it shows at most {limit}"
            f"{' with --heads' if args.heads else ''}: plot a shorter sentence"
        )


def run(args: argparse.Namespace) -> int:
    from qkv.io import check_output_file
    from qkv.tasks.run_dir import model_task
    from qkv.tasks.seen import ImageView
    from qkv.tasks.spec import ViewOptions
    from qkv.viz.figure_file import figure_format

    spec = model_task(args.model)
    given = {"beam": args.beam is not None, "layer": args.layer is not None,
             "pooling": args.pooling, "heads": args.heads}  # fmt: skip
    spec.check_options("plot-attention", [k for k, v in given.items() if v], "view")
    if spec.input == "text":
        _check_words(args)
    args.format = figure_format(args.output, args.format)  # refused before the model loads
    check_output_file(args.output)
    runner = spec.load(args.model)
    item = runner.read_image(args.text) if spec.input == "image" else args.text
    new_tokens = 0
    if spec.generates:  # a continuation, as long as the plot has room for
        limit = _plot_limit(args)
        new_tokens = runner.new_tokens(
            runner.token_count(args.text), shown=limit, shows="a plot shows", requested=None,
            most=limit,
        )  # fmt: skip
    options = ViewOptions(
        beam=args.beam, pooling=args.pooling, new_tokens=new_tokens, name=Path(args.text).name
    )
    seen = runner.views(item, options)
    if not seen.views:
        raise ValueError(f"the model in {args.model} has no attention to plot")
    view = seen.views[0]
    if isinstance(view, ImageView):
        path = _plot_image(args, view, f"{Path(args.text).name}: {seen.summary}")
    else:
        path = _plot_tokens(args, view)
    print(seen.summary)
    print(f"wrote {path}")
    return 0


def _layer(args: argparse.Namespace, layers: int) -> int:
    """``--layer`` (default: the last) as an index into ``layers``."""
    layer = -1 if args.layer is None else args.layer
    if not -layers <= layer < layers:
        raise ValueError(f"--layer {layer} is out of range for {layers} layers")
    return layer % layers


def _plot_tokens(args: argparse.Namespace, view) -> Path:
    from qkv.viz.heatmap import plot_alignment, plot_heads

    if not view.layers:
        raise ValueError(f"the model in {args.model} has no attention layers to plot")
    layer = _layer(args, len(view.layers))
    weights = view.layers[layer]  # (H, Tq, Tk)
    _check_tokens(args, view.keys, view.queries)
    title = f"layer {layer}: {args.text}"
    if args.heads:
        return plot_heads(
            weights, view.keys, view.queries, args.output, title=title, format=args.format
        )
    return plot_alignment(
        weights.mean(0), view.keys, view.queries, args.output, title=title,
        axis_labels=view.axis_labels, format=args.format,
    )  # fmt: skip


def _plot_image(args: argparse.Namespace, view, title: str) -> Path:
    """A layered view (a ViT's): its summary maps and each layer's head mean, or every head of
    ``--layer`` with ``--heads``; any other: every map."""
    import torch

    from qkv.viz.image_attention import plot_image_attention

    if view.layered:
        layer = _layer(args, view.layers)
        if args.heads:
            group = view.groups[view.summaries + layer]
            maps = [(f"{group.name} {label}", grid) for label, grid in group.maps[1:]]
        else:
            summary, layers = view.groups[: view.summaries], view.groups[view.summaries :]
            maps = [pair for group in summary for pair in group.maps] + [
                (f"{group.name}, {group.maps[0][0]}", group.maps[0][1]) for group in layers
            ]
    else:
        maps = [pair for group in view.groups for pair in group.maps]
    if not maps:
        raise ValueError(f"{args.text}: the model's output has no attention to plot")
    grids = torch.stack([grid for _, grid in maps])
    return plot_image_attention(view.image, grids, [label for label, _ in maps], args.output,
                                title=title, format=args.format)  # fmt: skip

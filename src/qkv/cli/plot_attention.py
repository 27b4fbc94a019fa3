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
        "attention over the image for each word of the caption.",
    )
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument(
        "text", help="the sentence to translate or encode, or the image file of a vision model"
    )
    parser.add_argument("-o", "--output", required=True, help="image file (.png, .svg or .pdf)")
    parser.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
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
    from qkv.tasks.run_dir import model_task

    task = model_task(args.model)
    if task == "image_classification":
        return run_vit(args)
    if task == "captioning":
        return run_captioner(args)
    _check_words(args)
    if task in ("classification", "tagging"):
        return run_encoder(args)
    return run_translator(args)


def run_translator(args: argparse.Namespace) -> int:
    from qkv.tasks.translation import Translator
    from qkv.viz.heatmap import plot_alignment, plot_heads

    translator = Translator.load(args.model)
    translation, layers = translator.cross_attention(args.text, beam_size=args.beam)
    if not layers:
        raise ValueError(
            f"the model in {args.model} has no attention to plot (it is the fixed-context baseline)"
        )
    if not -len(layers) <= args.layer < len(layers):
        raise ValueError(f"--layer {args.layer} is out of range for {len(layers)} decoder layers")
    weights = layers[args.layer]  # (H, T, S)
    layer = args.layer % len(layers)
    title = f"{translation.source}\n{translation.text}"
    src, tgt = translation.source_pieces, translation.target_pieces
    _check_tokens(args, src, tgt)
    if args.heads:
        path = plot_heads(weights, src, tgt, args.output, title=f"layer {layer}: {title}")
    else:
        path = plot_alignment(weights.mean(0), src, tgt, args.output, title=title)
    print(translation.text)
    print(f"wrote {path}")
    return 0


def run_encoder(args: argparse.Namespace) -> int:
    from qkv.tasks.classification import Classifier
    from qkv.tasks.run_dir import model_task
    from qkv.tasks.tagging import Tagger
    from qkv.viz.heatmap import plot_alignment, plot_heads

    if model_task(args.model) == "classification":
        classifier = Classifier.load(args.model)
        tokens, layers = classifier.attention(args.text)
        prediction = classifier.predict([args.text])[0]
        summary = f"{prediction.label} ({prediction.probabilities[prediction.label]:.2f})"
        if args.pooling:
            tokens, weights = classifier.pooling_weights(args.text)
            if weights is None:
                raise ValueError(
                    f"the model in {args.model} pools with {classifier.model.config.pooling!r}, "
                    "which has no weights; --pooling needs attention or structured pooling"
                )
            hops = [f"hop {i}" for i in range(weights.size(0))]
            _check_tokens(args, tokens, hops)
            path = plot_alignment(
                weights, tokens, hops, args.output, title=args.text, axis_labels=("token", "hop")
            )
            print(summary)
            print(f"wrote {path}")
            return 0
    elif args.pooling:
        raise ValueError("--pooling is for classifiers; this model is a tagger")
    else:
        tagger = Tagger.load(args.model)
        tokens, layers = tagger.attention(args.text)
        summary = " ".join(f"{w}/{t}" for w, t in tagger.tag([args.text])[0])
    if not layers:
        raise ValueError(f"the model in {args.model} has no self-attention layers to plot")
    if not -len(layers) <= args.layer < len(layers):
        raise ValueError(f"--layer {args.layer} is out of range for {len(layers)} layers")
    weights = layers[args.layer]  # (H, T, T)
    title = f"layer {args.layer % len(layers)}: {args.text}"
    _check_tokens(args, tokens)
    if args.heads:
        path = plot_heads(weights, tokens, tokens, args.output, title=title)
    else:
        path = plot_alignment(
            weights.mean(0), tokens, tokens, args.output, title=title, axis_labels=("key", "query")
        )
    print(summary)
    print(f"wrote {path}")
    return 0


def run_vit(args: argparse.Namespace) -> int:
    import torch

    from qkv.tasks.image_classification import ImageClassifier
    from qkv.viz.image_attention import plot_image_attention

    if args.pooling:
        raise ValueError("--pooling is for text classifiers; this model is a Vision Transformer")
    classifier = ImageClassifier.load(args.model)
    image = classifier.read_images([args.text])[0]
    seen = classifier.attention(image)
    layers = seen.cls_maps.size(0)
    if not -layers <= args.layer < layers:
        raise ValueError(f"--layer {args.layer} is out of range for {layers} layers")
    if args.heads:
        layer = args.layer % layers
        maps = seen.cls_maps[layer]  # (H, gh, gw)
        titles = [f"layer {layer} head {h}" for h in range(maps.size(0))]
    else:  # the rollout, then each layer's head mean
        maps = torch.cat([seen.rollout[None], seen.cls_maps.mean(1)])
        titles = ["rollout"] + [f"layer {i}, head mean" for i in range(layers)]
    summary = (
        f"{seen.prediction.label} ({seen.prediction.probabilities[seen.prediction.label]:.2f})"
    )
    path = plot_image_attention(
        image, maps, titles, args.output, title=f"{Path(args.text).name}: {summary}"
    )
    print(summary)
    print(f"wrote {path}")
    return 0


def run_captioner(args: argparse.Namespace) -> int:
    from qkv.data.images import read_image
    from qkv.tasks.captioning import Captioner
    from qkv.viz.image_attention import plot_image_attention

    if args.pooling or args.heads:
        raise ValueError("--pooling and --heads are not for captioners (one attention per word)")
    captioner = Captioner.load(args.model)
    image = read_image(args.text, channels=captioner.tile_shape[0])
    caption = captioner.caption([image], [args.text])[0]
    text = " ".join(caption.words)
    if not caption.words:
        raise ValueError(f"the model gave {args.text} an empty caption: nothing to plot")
    path = plot_image_attention(
        image,
        caption.attention,
        caption.words,
        args.output,
        title=f"{Path(args.text).name}: {text}",
    )
    print(text)
    print(f"wrote {path}")
    return 0

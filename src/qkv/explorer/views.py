"""What the attention explorer shows for one input: a model's output and its attention, as plain
JSON-ready values (the API's answer and the data inlined in an exported page).

The result of :func:`explore` is a dict::

    {"model": NAME, "kind": TASK, "input": {...}, "output": {"summary": str, ...},
     "views": [VIEW, ...]}

and each view one of two types:

- ``"tokens"``: token-to-token attention, ``{"type": "tokens", "id", "title", "self": bool,
  "queries": [Tq labels], "keys": [Tk labels], "layers": L x H x Tq x Tk weights}``. ``self`` is
  true when queries and keys are the same sequence (encoder, decoder, language model), false for
  a translation's cross-attention (target rows, source columns).
- ``"image"``: attention over an image, ``{"type": "image", "id", "title", "image": "data:
  image/png;base64,...", "width", "height", "groups": [{"name", "maps": [{"label", "grid":
  gh x gw weights}]}]}``; every grid covers the whole image in equal cells (a ViT's patches, a
  captioner's regions).

Weights are rounded to :data:`DIGITS` decimals (a page does not need more, and the JSON stays
small). Tasks: translation (cross-attention, and the encoder's and decoder's self-attention for
Transformers), language models (generate, then the causal self-attention over prompt and
continuation), classification and tagging (encoder self-attention), Vision Transformers ([CLS]
maps per layer and head, rollout) and captioners (each word's map over the strip).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from qkv.decoding.sampling import SamplingConfig
from qkv.tasks.input_checks import check_unicode as tasks_check_unicode

DIGITS = 4  # decimals kept of each attention weight
TEXT_KINDS = ("translation", "language_model", "classification", "tagging")
IMAGE_KINDS = ("image_classification", "captioning")


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (the server refuses more with a 4xx naming the limit).

    Args:
        max_chars: characters of a text input.
        max_image_bytes: bytes of an uploaded image file.
        max_image_side: pixels of an image's longer side (checked before decoding).
        max_new_tokens: tokens a language model may generate for one request.
        max_tokens: tokens of a text view (queries or keys); longer inputs are refused, since
            ``L x H x T x T`` weights grow fast.
    """

    max_chars: int = 1000
    max_image_bytes: int = 2_000_000
    max_image_side: int = 1024
    max_new_tokens: int = 100
    max_tokens: int = 256

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_image_bytes", "max_image_side", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_tokens < 2:
            raise ValueError(f"max_tokens must be >= 2, got {self.max_tokens}")


class InputError(ValueError):
    """The request's input does not suit the model or the limits (the API answers 422)."""


def _rounded(weights: Tensor) -> list:
    # In float64: rounded in float32, 0.003 would be written 0.003000000026077032.
    return weights.detach().double().cpu().round(decimals=DIGITS).tolist()


def token_view(
    view_id: str,
    title: str,
    queries: Sequence[str],
    keys: Sequence[str],
    layers: Sequence[Tensor],
    *,
    self_attention: bool,
) -> dict[str, Any]:
    """A ``"tokens"`` view of ``layers``, one ``(H, Tq, Tk)`` tensor per layer."""
    for index, weights in enumerate(layers):
        if weights.dim() != 3 or tuple(weights.shape[1:]) != (len(queries), len(keys)):
            raise ValueError(
                f"layer {index} of {view_id!r} has shape {tuple(weights.shape)}, expected "
                f"(H, {len(queries)}, {len(keys)})"
            )
    return {
        "type": "tokens",
        "id": view_id,
        "title": title,
        "self": self_attention,
        "queries": list(queries),
        "keys": list(keys),
        "layers": [_rounded(w) for w in layers],
    }


def png_data_url(image: Tensor) -> str:
    """A ``uint8`` ``(C, H, W)`` image (C = 1 or 3) as a ``data:image/png;base64,`` URL."""
    from PIL import Image

    pixels = image.detach().cpu()
    if pixels.dtype != torch.uint8:
        pixels = (pixels.float().clamp(0, 1) * 255).round().to(torch.uint8)
    array = pixels[0].numpy() if pixels.size(0) == 1 else pixels.permute(1, 2, 0).numpy()
    buffer = io.BytesIO()
    Image.fromarray(array, mode="L" if pixels.size(0) == 1 else "RGB").save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_view(
    view_id: str,
    title: str,
    image: Tensor,
    groups: Sequence[tuple[str, Sequence[tuple[str, Tensor]]]],
) -> dict[str, Any]:
    """An ``"image"`` view: ``image`` ``(C, H, W)`` and named groups of ``(label, (gh, gw))``
    maps."""
    return {
        "type": "image",
        "id": view_id,
        "title": title,
        "image": png_data_url(image),
        "width": int(image.size(-1)),
        "height": int(image.size(-2)),
        "groups": [
            {
                "name": name,
                "maps": [{"label": label, "grid": _rounded(grid)} for label, grid in maps],
            }
            for name, maps in groups
        ],
    }


def _check_tokens(count: int, limits: Limits, what: str) -> None:
    if count > limits.max_tokens:
        raise InputError(
            f"{what} has {count} tokens; the explorer shows at most {limits.max_tokens} "
            "(shorten the input)"
        )


def check_unicode(value: str, what: str) -> str:
    """``value`` if UTF-8 can encode it; a lone surrogate is an :class:`InputError` (422)."""
    hint = (
        "; send valid Unicode (in JSON, an escape \\uD800-\\uDBFF must be followed by one of "
        "\\uDC00-\\uDFFF)"
    )
    return tasks_check_unicode(value, what, hint=hint, error=InputError)


def check_text(text: str, limits: Limits) -> str:
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}")
    if len(text) > limits.max_chars:
        raise InputError(f"the text has {len(text):,} characters; at most {limits.max_chars:,}")
    if not text.strip():
        raise InputError("the text is empty")
    return check_unicode(text, "the text")


def check_text_tokens(
    kind: str, runner: Any, text: str, limits: Limits, max_new_tokens: int | None = None
) -> int:
    """Refuse ``text`` when its tokens are over the limits, before the model's lock is taken:
    every limit that the input alone decides. Returns how many tokens a language model is to
    generate (``max_new_tokens``, or its default shortened to fit the limit; 0 for other kinds).

    Raises:
        InputError: too many tokens (naming the count and the limit), a character a
            character-level model cannot read, a ``max_new_tokens`` out of range.
    """
    try:
        count = runner.token_count(text)  # the tokenizer alone: no model runs, no lock needed
    except InputError:
        raise
    except ValueError as error:  # the tokenizers' own checks name what is wrong
        raise InputError(str(error)) from None
    if kind != "language_model":
        _check_tokens(count, limits, "the text")
        return 0
    limit, what = limits.max_tokens, "the explorer shows"
    if runner.model.config.max_len < limit:
        limit, what = runner.model.config.max_len, "this model reads"
    if count > limit:
        raise InputError(f"the prompt has {count} tokens; {what} at most {limit} (shorten it)")
    if max_new_tokens is None:
        default = min(runner.config.decode.max_new_tokens, limits.max_new_tokens)
        return min(default, limit - count)
    if not 0 <= max_new_tokens <= limits.max_new_tokens:
        raise InputError(
            f"max_new_tokens must be between 0 and {limits.max_new_tokens}, got {max_new_tokens}"
        )
    if count + max_new_tokens > limit:
        raise InputError(
            f"the prompt has {count} tokens and max_new_tokens is {max_new_tokens}: "
            f"{count + max_new_tokens} tokens, but {what} at most {limit}; ask for at most "
            f"{limit - count} new tokens or shorten the prompt"
        )
    return max_new_tokens


# ------------------------------------------------------------------------------- per task


# The attentions of a translation model, in the order shown: (id, title, queries, keys) with
# "source", "target" and "read" (what the decoder read at each step: <s>, then its outputs).
TRANSLATION_VIEWS = (
    ("cross", "cross-attention (target x source)", "target", "source"),
    ("encoder", "encoder self-attention", "source", "source"),
    ("decoder", "decoder self-attention (output step x tokens read)", "target", "read"),
)


def explore_translation(translator: Any, text: str, limits: Limits) -> dict[str, Any]:
    translation, maps = translator.attentions(text)
    source, target = translation.source_pieces, translation.target_pieces
    _check_tokens(max(len(source), len(target)), limits, "the translation")
    tokens = {"source": source, "target": target, "read": ["<s>", *target[:-1]]}
    views = [
        token_view(view_id, title, tokens[rows], tokens[cols], maps[view_id],
                   self_attention=view_id != "cross")
        for view_id, title, rows, cols in TRANSLATION_VIEWS
        if view_id in maps
    ]  # fmt: skip
    return {"output": {"summary": translation.text, "text": translation.text}, "views": views}


def _encoder_views(tokens: list[str], layers: list[Tensor], limits: Limits) -> list[dict]:
    _check_tokens(len(tokens), limits, "the text")
    if not layers:  # e.g. a BiLSTM without its self-attention layer
        return []
    title = "encoder self-attention"
    return [token_view("encoder", title, tokens, tokens, layers, self_attention=True)]


def explore_language_model(lm: Any, text: str, limits: Limits, new_tokens: int) -> dict[str, Any]:
    """Generate ``new_tokens`` greedily (as :func:`check_text_tokens` allowed), then the causal
    self-attention over prompt and continuation."""
    continuation = ""
    if new_tokens:
        sampling = replace(SamplingConfig(), temperature=0.0, max_new_tokens=new_tokens)
        (continuation,) = lm.generate([text], sampling)
    # Byte-level BPE may split the text read back otherwise than it was generated.
    ids = lm.encode_prompt(text + continuation)
    _check_tokens(len(ids), limits, "the prompt and its continuation")
    tokens, layers = lm.attention(text + continuation)
    view = token_view(
        "decoder", "causal self-attention (prompt and continuation)", tokens, tokens, layers,
        self_attention=True,
    )  # fmt: skip
    return {
        "output": {"summary": text + continuation, "text": continuation, "prompt": text},
        "views": [view],
    }


def explore_classification(classifier: Any, text: str, limits: Limits) -> dict[str, Any]:
    views = _encoder_views(*classifier.attention(text), limits)
    prediction = classifier.predict([text])[0]
    probability = prediction.probabilities[prediction.label]
    output = {
        "summary": f"{prediction.label} ({probability:.2f})",
        "label": prediction.label,
        "probabilities": dict(prediction.probabilities),
    }
    return {"output": output, "views": views}


def explore_tagging(tagger: Any, text: str, limits: Limits) -> dict[str, Any]:
    views = _encoder_views(*tagger.attention(text), limits)
    tagged = tagger.tag([text])[0]
    output = {
        "summary": " ".join(f"{word}/{tag}" for word, tag in tagged),
        "tags": [[word, tag] for word, tag in tagged],
    }
    return {"output": output, "views": views}


def explore_vit(classifier: Any, image: Tensor) -> dict[str, Any]:
    seen = classifier.attention(image)
    prediction = seen.prediction
    layers, heads = seen.cls_maps.shape[:2]
    groups: list[tuple[str, list[tuple[str, Tensor]]]] = [("rollout", [("rollout", seen.rollout)])]
    for layer in range(layers):
        maps = seen.cls_maps[layer]  # (H, gh, gw)
        groups.append(
            (
                f"layer {layer}",
                [("head mean", maps.mean(0))] + [(f"head {h}", maps[h]) for h in range(heads)],
            )
        )
    probability = prediction.probabilities[prediction.label]
    output = {
        "summary": f"{prediction.label} ({probability:.2f})",
        "label": prediction.label,
        "probabilities": dict(prediction.probabilities),
    }
    view = image_view("vit", "[CLS] attention to the patches", image, groups)
    return {"output": output, "views": [view]}


def explore_captioner(captioner: Any, image: Tensor, name: str) -> dict[str, Any]:
    caption = captioner.caption([image], [name])[0]
    maps = [(f"{i}: {word}", caption.attention[i]) for i, word in enumerate(caption.words)]
    view = image_view("caption", "attention over the image, word by word", image, [("words", maps)])
    text = " ".join(caption.words)
    return {
        "output": {"summary": text, "caption": text, "words": list(caption.words)},
        "views": [view],
    }

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
small). What each task shows is its runner's ``views`` (:mod:`qkv.tasks.spec`): translation
(cross-attention, and the encoder's and decoder's self-attention for Transformers), language
models (generate, then the causal self-attention over prompt and continuation), classification
and tagging (encoder self-attention), Vision Transformers ([CLS] maps per layer and head,
rollout) and captioners (each word's map over the strip).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from qkv.tasks.input_checks import check_unicode as tasks_check_unicode
from qkv.tasks.spec import Seen, TaskSpec, TokenView

DIGITS = 4  # decimals kept of each attention weight


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
    spec: TaskSpec, runner: Any, text: str, limits: Limits, max_new_tokens: int | None = None
) -> int:
    """Refuse ``text`` when its tokens are over the limits, before the model's lock is taken:
    every limit that the input alone decides. Returns how many tokens a model that generates
    is to write (``max_new_tokens``, or its default shortened to fit the limit; 0 for others).

    Raises:
        InputError: too many tokens (naming the count and the limit), a character a
            character-level model cannot read, a ``max_new_tokens`` out of range.
    """
    try:
        count = runner.token_count(text)  # the tokenizer alone: no model runs, no lock needed
        if spec.generates:
            return runner.new_tokens(
                count, shown=limits.max_tokens, shows="the explorer shows",
                requested=max_new_tokens, most=limits.max_new_tokens,
            )  # fmt: skip
    except InputError:
        raise
    except ValueError as error:  # the tokenizers' and the runner's own checks name the problem
        raise InputError(str(error)) from None
    _check_tokens(count, limits, "the text")
    return 0


def seen_json(seen: Seen, limits: Limits) -> dict[str, Any]:
    """A runner's :class:`~qkv.tasks.spec.Seen` as the API's ``output`` and ``views``;
    a token view longer than ``limits.max_tokens`` is an :class:`InputError` naming what it is
    of."""
    longest = max(
        (max(len(v.queries), len(v.keys)) for v in seen.views if isinstance(v, TokenView)),
        default=0,
    )
    _check_tokens(longest, limits, seen.subject)
    views = [
        token_view(v.id, v.title, v.queries, v.keys, v.layers, self_attention=v.self_attention)
        if isinstance(v, TokenView)
        else image_view(v.id, v.title, v.image, [(g.name, g.maps) for g in v.groups])
        for v in seen.views
    ]
    return {"output": seen.output, "views": views}

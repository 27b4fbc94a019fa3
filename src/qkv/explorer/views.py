"""What the attention explorer shows for one input: a model's output and its attention, as plain
JSON-ready values (the API's answer and the data inlined in an exported page).

The result of :meth:`.ExplorerModel.run` is a dict::

    {"model": NAME, "kind": TASK, "input": {...}, "output": {"summary": str, ...},
     "views": [VIEW, ...]}

with each view as :mod:`qkv.viz.view_json` describes (``"tokens"`` or ``"image"``).

What each task shows is its runner's ``views`` (:mod:`qkv.tasks.spec`): translation
(cross-attention, and the encoder's and decoder's self-attention for Transformers), language
models (generate, then the causal self-attention over prompt and continuation), classification
and tagging (encoder self-attention), Vision Transformers ([CLS] maps per layer and head,
rollout) and captioners (each word's map over the strip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qkv.tasks.input_checks import check_unicode as tasks_check_unicode
from qkv.tasks.seen import Seen, TokenView
from qkv.tasks.spec import TaskSpec
from qkv.viz.view_json import DIGITS as DIGITS  # the API's rounding, which its tests read
from qkv.viz.view_json import token_view as token_view
from qkv.viz.view_json import views_json


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


def check_views(seen: Seen, limits: Limits) -> Seen:
    """``seen``, or an :class:`InputError` naming what it is of when a token view is longer
    than ``limits.max_tokens`` (a translation or a caption longer than its input's tokens
    were: only the run tells)."""
    longest = max(
        (max(len(v.queries), len(v.keys)) for v in seen.views if isinstance(v, TokenView)),
        default=0,
    )
    _check_tokens(longest, limits, seen.subject)
    return seen


def seen_json(seen: Seen) -> dict[str, Any]:
    """A runner's :class:`~qkv.tasks.seen.Seen` (checked by :func:`check_views`) as the API's
    ``output`` and ``views``."""
    return {"output": seen.output, "views": views_json(seen.views)}

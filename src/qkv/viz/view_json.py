"""Attention views as plain JSON-ready values: what the attention page draws (the explorer's
answer, an exported page's data, a notebook's display).

Two types of view:

- ``"tokens"``: token-to-token attention, ``{"type": "tokens", "id", "title", "self": bool,
  "queries": [Tq labels], "keys": [Tk labels], "layers": L x H x Tq x Tk weights}``. ``self`` is
  true when queries and keys are the same sequence (encoder, decoder, language model), false for
  a translation's cross-attention (target rows, source columns). With its query and key vectors
  (``ViewOptions.neuron``), it also has ``"neuron": {"q": L x H x Tq x Dk, "k": L x Hkv x Tk x
  Dk}`` (rotary applied, rounded like the weights), from which the page's neuron view computes
  ``q * k``, the score ``sum(q * k)`` and the scaled score ``/ sqrt(Dk)`` for a chosen pair; query
  head ``h`` reads key head ``h // (H / Hkv)``. Such a view is about ``2 L H T Dk`` numbers of
  some 7 bytes each (``L = 4, H = 8, T = 64, Dk = 32``: about 0.9 MB).
- ``"image"``: attention over an image, ``{"type": "image", "id", "title", "image": "data:
  image/png;base64,...", "width", "height", "groups": [{"name", "maps": [{"label", "grid":
  gh x gw weights}]}]}``; every grid covers the whole image in equal cells (a ViT's patches, a
  captioner's regions).

A ``"tokens"`` view whose pieces carry subword markers (:mod:`qkv.viz.words`) also holds
``"words": {"queries", "keys", "layers", "special_queries", "special_keys"}``, the same
attention merged into words (a word receives the sum of its pieces' attention and gives their
mean); one with special tokens (``[CLS]``, ``</s>``...) holds ``"special_queries"`` and
``"special_keys"``, their indices, which the page can hide (rows and columns dropped, rows not
renormalised: what :func:`~qkv.viz.words.merge_word_attention` does with ``hide_special``).

Weights are rounded to :data:`DIGITS` decimals (a page does not need more, and the JSON stays
small). A self-attention view with marks (a tagger's entity type or tag of each token,
``""`` for none: :mod:`qkv.viz.marks`) holds ``"marks": [T labels]``, and its ``"words"``
``"marks": [W labels]``, each word's first piece's. :func:`views_json` takes the task layer's
``TokenView`` / ``ImageView`` by their fields (this layer is below the tasks and does not import
them).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from qkv.viz.marks import check_marks, word_marks
from qkv.viz.words import (
    SPECIAL_PIECES,
    merge_word_attention,
    piece_groups,
    word_labels,
)

DIGITS = 4  # decimals kept of each attention weight


def rounded(weights: Tensor) -> list:
    """``weights`` as nested lists, rounded to :data:`DIGITS` decimals."""
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
    vectors: Sequence[tuple[Tensor, Tensor]] | None = None,
    marks: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A ``"tokens"`` view of ``layers``, one ``(H, Tq, Tk)`` tensor per layer; ``vectors``: per
    layer its query ``(H, Tq, Dk)`` and key ``(Hkv, Tk, Dk)`` vectors (the ``"neuron"`` data);
    ``marks``: a self-attention view's label of each token (:mod:`qkv.viz.marks`)."""
    for index, weights in enumerate(layers):
        if weights.dim() != 3 or tuple(weights.shape[1:]) != (len(queries), len(keys)):
            raise ValueError(
                f"layer {index} of {view_id!r} has shape {tuple(weights.shape)}, expected "
                f"(H, {len(queries)}, {len(keys)})"
            )
    view: dict[str, Any] = {
        "type": "tokens",
        "id": view_id,
        "title": title,
        "self": self_attention,
        "queries": list(queries),
        "keys": list(keys),
        "layers": [rounded(w) for w in layers],
    }
    if marks is not None:
        view["marks"] = check_marks(view_id, marks, queries, keys, self_attention=self_attention)
    special = _special(queries), _special(keys)
    if any(special):
        view["special_queries"], view["special_keys"] = special
    q_groups, k_groups = piece_groups(queries), piece_groups(keys)
    if max(q_groups, default=-1) + 1 < len(queries) or max(k_groups, default=-1) + 1 < len(keys):
        merged = [
            merge_word_attention(
                w, queries, keys, query_groups=q_groups, key_groups=k_groups
            )  # (H, Wq, Wk)
            for w in layers
        ]
        view["words"] = {
            "queries": merged[0].query_words,
            "keys": merged[0].key_words,
            "layers": [rounded(m.weights) for m in merged],
            "special_queries": _special_words(queries, q_groups),
            "special_keys": _special_words(keys, k_groups),
        }
        if marks is not None:
            view["words"]["marks"] = word_marks(view["marks"], k_groups)
    if vectors is not None:
        view["neuron"] = {
            "q": [rounded(q) for q, _ in vectors],
            "k": [rounded(k) for _, k in vectors],
        }
    return view


def _special(tokens: Sequence[str]) -> list[int]:
    """The indices of the special tokens."""
    return [i for i, token in enumerate(tokens) if token in SPECIAL_PIECES]


def _special_words(tokens: Sequence[str], groups: list[int]) -> list[int]:
    return [i for i, (_, special) in enumerate(word_labels(tokens, groups)) if special]


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
                "maps": [{"label": label, "grid": rounded(grid)} for label, grid in maps],
            }
            for name, maps in groups
        ],
    }


def views_json(views: Iterable[Any]) -> list[dict[str, Any]]:
    """Each view as JSON: one with ``queries`` (a ``TokenView``: ``id``, ``title``, ``queries``,
    ``keys``, ``layers``, ``self_attention``) as ``"tokens"``, one with ``groups`` (an
    ``ImageView``: ``id``, ``title``, ``image``, ``groups`` of ``name`` and ``maps``) as
    ``"image"``.

    Raises:
        TypeError: a view that is neither.
    """
    out = []
    for v in views:
        if hasattr(v, "queries"):
            out.append(
                token_view(
                    v.id,
                    v.title,
                    v.queries,
                    v.keys,
                    v.layers,
                    self_attention=v.self_attention,
                    vectors=getattr(v, "vectors", None),
                    marks=getattr(v, "marks", None),
                )
            )
        elif hasattr(v, "groups"):
            out.append(image_view(v.id, v.title, v.image, [(g.name, g.maps) for g in v.groups]))
        else:
            raise TypeError(
                f"a view must be a TokenView or an ImageView (qkv.tasks.spec), got "
                f"{type(v).__name__}"
            )
    return out

"""The explorer's page data: which mode, which models, which limits (the page itself, its
template, script and style, are :mod:`qkv.viz.page`'s, which a notebook's display shares).

``served``: the page asks the server (``POST api``) for each input it is given. ``static``: an
exported page (``qkv explore``) shows the one ``result`` inlined. ``RESULT`` is what
:func:`qkv.explorer.session.ExplorerModel.run` returns (:mod:`qkv.explorer.views` describes it).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from qkv.explorer.views import Limits
from qkv.viz.page import MARKERS, render_page

__all__ = ["MARKERS", "page_data", "render_page"]


def page_data(
    mode: str,
    models: list[dict[str, Any]],
    limits: Limits,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The data a page starts from (see :mod:`qkv.viz.page`)."""
    if mode not in ("served", "static"):
        raise ValueError(f"mode must be served or static, got {mode!r}")
    if mode == "static" and result is None:
        raise ValueError("a static page needs the result it shows")
    return {"mode": mode, "models": models, "limits": asdict(limits), "result": result,
            "api": "api/run"}  # fmt: skip

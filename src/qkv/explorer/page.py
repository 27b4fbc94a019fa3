"""The explorer's page: one HTML file with its style, script and data inlined.

``static/explorer.html`` holds three markers, ``{{css}}``, ``{{js}}`` and ``{{data}}``, filled
with ``static/explorer.css``, ``static/explorer.js`` and the page's data as JSON::

    {"mode": "served" | "static", "models": [ExplorerModel.describe(), ...],
     "limits": {...Limits}, "result": RESULT or null, "api": "api/run"}

``served``: the page asks the server (``POST api``) for each input it is given. ``static``: an
exported page (``qkv explore``) shows the one ``result`` inlined, needs no server and loads
nothing from the network. ``RESULT`` is what :func:`qkv.explorer.session.ExplorerModel.run`
returns (:mod:`qkv.explorer.views` describes it).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from importlib import resources
from typing import Any

from qkv.explorer.views import Limits

MARKERS = ("{{css}}", "{{js}}", "{{data}}")


def _static(name: str) -> str:
    return (resources.files("qkv.explorer") / "static" / name).read_text(encoding="utf-8")


def page_data(
    mode: str,
    models: list[dict[str, Any]],
    limits: Limits,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The data a page starts from (see the module doc)."""
    if mode not in ("served", "static"):
        raise ValueError(f"mode must be served or static, got {mode!r}")
    if mode == "static" and result is None:
        raise ValueError("a static page needs the result it shows")
    return {"mode": mode, "models": models, "limits": asdict(limits), "result": result,
            "api": "api/run"}  # fmt: skip


def render_page(data: dict[str, Any]) -> str:
    """The page, with ``data`` inlined as JSON inside a ``<script type="application/json">``
    (``<``, ``>`` and ``&`` escaped, so no text in it can close the element)."""
    template = _static("explorer.html")
    for marker in MARKERS:
        if template.count(marker) != 1:
            raise RuntimeError(f"explorer.html must hold {marker} exactly once")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    # One pass, so that text inside the CSS or script can never be taken for a later marker.
    parts = {"{{css}}": _static("explorer.css"), "{{js}}": _static("explorer.js"), "{{data}}": text}
    out, rest = [], template
    while True:
        found = [(rest.find(m), m) for m in MARKERS if rest.find(m) >= 0]
        if not found:
            out.append(rest)
            break
        index, marker = min(found)
        out += [rest[:index], parts[marker]]
        rest = rest[index + len(marker) :]
    return "".join(out)

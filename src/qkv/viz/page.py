"""The attention page: one HTML file with its style, script and data inlined, loading nothing
from the network. ``qkv explore`` writes it, ``qkv serve`` serves it, and a notebook shows it
inline (:mod:`qkv.viz.notebook`).

``static/explorer.html`` holds three markers, ``{{css}}``, ``{{js}}`` and ``{{data}}``, filled
with ``static/explorer.css``, the script (``static/export.js``: PNG and SVG export;
``static/modelview.js``: the model view's grid; ``static/words.js``: the words toggles;
``static/compare.js``: the compare mode; ``static/neuron.js``: the neuron view;
``static/explorer.js``: the page) and the page's data as JSON::

    {"mode": "served" | "static", "models": [{"name", "kind", "label", "input"}, ...],
     "limits": {...}, "result": RESULT or null, "api": "api/run", "inline": bool}

``served``: the page asks the server (``POST api``) for each input it is given. ``static``: an
exported page shows the one ``result`` inlined, needs no server and loads nothing from the
network; ``inline`` (a notebook's display) drops the page's header and note. ``RESULT`` is
``{"model", "kind", "input", "output", "views"}`` (:mod:`qkv.viz.view_json` makes the views).
``{"mode": "compare", ...}``: two results side by side with their difference
(:mod:`qkv.viz.compare` describes its data).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

MARKERS = ("{{css}}", "{{js}}", "{{data}}")
# The page's script, in order: the helpers define one global name each (qkvExport,
# qkvModelView, qkvWords, qkvCompare, qkvNeuron), which the page's main script (explorer.js) uses.
SCRIPTS = ("export.js", "modelview.js", "words.js", "compare.js", "neuron.js", "explorer.js")


def static_text(name: str) -> str:
    """One of the page's files in ``qkv/viz/static/``."""
    return (resources.files("qkv.viz") / "static" / name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """``data`` as JSON that can sit inside a ``<script>`` element: ``<``, ``>`` and ``&``
    escaped, so no text in it can close the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_script() -> str:
    """The page's script: :data:`SCRIPTS` one after another."""
    return "\n".join(static_text(name) for name in SCRIPTS)


def render_page(data: dict[str, Any], *, css: str | None = None, js: str | None = None) -> str:
    """The page, with ``data`` inlined as JSON inside a ``<script type="application/json">``
    (:func:`script_json`); ``css`` / ``js``: the style and script to inline instead of the
    files as they are (a notebook's display inlines them shortened)."""
    template = static_text("explorer.html")
    for marker in MARKERS:
        if template.count(marker) != 1:
            raise RuntimeError(f"explorer.html must hold {marker} exactly once")
    parts = {
        "{{css}}": static_text("explorer.css") if css is None else css,
        "{{js}}": page_script() if js is None else js,
        "{{data}}": script_json(data),
    }
    # One pass, so that text inside the CSS or script can never be taken for a later marker.
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

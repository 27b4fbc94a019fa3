"""Attention views inline in a notebook (Jupyter, JupyterLab, VS Code): the attention page
(:mod:`qkv.viz.page`) in static, inline mode, inside an ``<iframe srcdoc>``.

Why a frame: each display is a page of its own, so two displays on one notebook share no ids, no
styles and no script globals, and the notebook's own styles cannot reach in. The frame's
``sandbox="allow-scripts allow-downloads"`` (no ``allow-same-origin``) gives it an opaque
origin: its script draws the views and can read nothing of the notebook. ``allow-downloads``
lets the page's export buttons save a view (PNG, SVG) the page built itself from a ``blob:``
URL, after a click; it grants no navigation of the notebook, no pop-up, no form, no access to
the notebook's origin. Its Content-Security-Policy allows no connection at all
(``default-src 'none'``, ``connect-src 'none'``): the page loads nothing from the network,
its images are ``data:`` URLs.

Size: the frame starts at a height estimated from the views; the page posts its real height
(``{qkvHeight: pixels}``) and a small script beside the frame, listening only to its own frame,
sets it (where a notebook runs no output scripts, the estimate stays, and the frame scrolls).
The page's script and style are inlined in every display, shortened (comments and indentation
dropped; :func:`shortened_js`): about 30 kB per display, plus the views' weights.
"""

from __future__ import annotations

import html
import re
import uuid
from typing import Any

from qkv.viz.page import page_script, render_page, static_text

CSP_SERVED = "connect-src 'self'"  # what the page's policy allows for the served explorer
CSP_INLINE = "connect-src 'none'"
MAX_HEIGHT = 4000  # px: the tallest a frame grows (a longer page scrolls inside it)
# Beside each frame: sets the frame's height to what its own page posts (no other message).
# It comes before its frame, so that it listens before the frame's page can post anything.
SIZER = (
    "(function () { window.addEventListener('message', function (event) {"
    " var frame = document.getElementById('FRAME');"
    " if (!frame || event.source !== frame.contentWindow || !event.data) return;"
    " var h = event.data.qkvHeight; if (typeof h !== 'number' || !(h > 0)) return;"
    " frame.style.height = Math.min(Math.ceil(h) + 4, MAX_HEIGHT) + 'px'; }); })();"
)


def shortened_js(text: str) -> str:
    """The page's script without its comment lines, blank lines and indentation: the same
    program (it has no template literal or string spanning lines)."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


def shortened_css(text: str) -> str:
    """The page's style without its comments, blank lines and indentation."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def matrix_cell(count: int) -> int:
    """The page's cell size (px) for a matrix of ``count`` tokens a side (explorer.js's)."""
    return 30 if count <= 12 else 22 if count <= 24 else 16 if count <= 48 else 12


def estimated_height(result: dict[str, Any]) -> int:
    """The frame's first height in pixels: the output line and each view's panel, as the page
    draws them (token matrices of 12 to 30 px cells; images about 320 px)."""
    height = 120
    for view in result.get("views", []):
        if view.get("type") == "tokens":
            count = max(len(view["queries"]), len(view["keys"]))
            height += 240 + matrix_cell(count) * len(view["queries"])
        else:
            height += 520
    return min(height, MAX_HEIGHT)


def compare_height(data: dict[str, Any]) -> int:
    """A first height for a comparison's frame: each pair's three matrices side by side."""
    height = 160 + 40 * len(data.get("unpaired", []))
    for pair in data.get("pairs", []):
        if pair.get("type") == "image":  # three images of about 240 px, with their controls
            height += 360
            continue
        count = max(len(pair["queries"]), len(pair["keys"]))
        height += 200 + matrix_cell(count) * len(pair["queries"])
    return min(height, MAX_HEIGHT)


def inline_page(result: dict[str, Any]) -> str:
    """The page a display shows: ``result`` (``{"output", "views"}``, optionally ``"model"``,
    ``"kind"``, ``"input"``) in static, inline mode, allowed no connection."""
    return inline_document({"mode": "static", "models": [], "limits": {}, "result": result})


def inline_document(data: dict[str, Any]) -> str:
    """The page of ``data`` (:mod:`qkv.viz.page`) for a display: inline, shortened, allowed no
    connection."""
    page = render_page(
        {**data, "inline": True},
        css=shortened_css(static_text("explorer.css")),
        js=shortened_js(page_script()),
    )
    if page.count(CSP_SERVED) != 1:
        raise RuntimeError(f"explorer.html's policy must hold {CSP_SERVED!r} exactly once")
    return page.replace(CSP_SERVED, CSP_INLINE)


def attribute(text: str) -> str:
    """``text`` escaped for an attribute value between single quotes: ``&`` and ``'`` only
    (the page has hundreds of ``"`` and few ``'``; ``<`` and ``>`` are plain text there)."""
    return text.replace("&", "&amp;").replace("'", "&#39;")


def inline_html(result: dict[str, Any], *, title: str = "qkv attention") -> str:
    """The HTML of one notebook display of ``result``: a sandboxed ``<iframe srcdoc>`` holding
    :func:`inline_page`, and the script that sizes it to its page (ids unique per display)."""
    return inline_frame(inline_page(result), estimated_height(result), title=title)


def inline_frame(page: str, height: int, *, title: str) -> str:
    """``page`` in a sandboxed ``<iframe srcdoc>``, ``height`` px at first, and the script that
    sizes it to its page (ids unique per display)."""
    frame = f"qkv-{uuid.uuid4().hex}"
    srcdoc = attribute(page)
    sizer = SIZER.replace("FRAME", frame).replace("MAX_HEIGHT", str(MAX_HEIGHT))
    return (
        f"<script>{sizer}</script>\n"
        f'<iframe id="{frame}" class="qkv-view" title="{html.escape(title, quote=True)}" '
        f'sandbox="allow-scripts allow-downloads" '
        f'style="width: 100%; height: {height}px; border: 0;" '
        f"srcdoc='{srcdoc}'></iframe>"
    )

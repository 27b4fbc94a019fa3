"""Reading a notebook display's HTML back: its frames, the page inside each, the page's data,
and every URL a browser would fetch from it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

# Attributes whose value a browser loads (or navigates to, or submits to).
URL_ATTRIBUTES = {"src", "href", "srcset", "action", "formaction", "poster", "data", "background",
                  "xlink:href", "ping", "manifest", "codebase", "cite", "longdesc"}  # fmt: skip
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]?([^'";\s]+)""", re.I)
ABSOLUTE = re.compile(r"""(?:https?:)?//[^\s'"`)]+""", re.I)
# In a script: the calls that load something, with an absolute URL as their first argument.
SCRIPT_LOADS = re.compile(
    r"""(?:fetch|import|importScripts|XMLHttpRequest\(\)\.open|\.open|WebSocket|EventSource"""
    r"""|sendBeacon|Worker|SharedWorker)\s*\(\s*(?:['"]\w+['"]\s*,\s*)?['"`]((?:https?:)?//[^'"`]+)""",
    re.I,
)
STATIC_IMPORT = re.compile(r"""\bimport\s+(?:[^'";]+\s+from\s+)?['"]((?:https?:)?//[^'"]+)""")


@dataclass
class Parsed:
    """What a page holds: its tags with their attributes, its scripts' and styles' text."""

    tags: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    scripts: list[tuple[dict[str, str], str]] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Parsed()
        self._open: tuple[str, dict[str, str]] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = {name: value or "" for name, value in attrs}
        self.out.tags.append((tag, values))
        if tag in ("script", "style"):
            self._open, self._text = (tag, values), []

    def handle_data(self, data):
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._open is not None and tag == self._open[0]:
            text = "".join(self._text)
            if tag == "script":
                self.out.scripts.append((self._open[1], text))
            else:
                self.out.styles.append(text)
            self._open = None


def parse(html: str) -> Parsed:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.out


def fetched_urls(html: str, *, links: bool = True) -> list[str]:
    """Every absolute (http, https or protocol-relative) URL a browser would load from ``html``:
    in URL attributes, in CSS (``url()``, ``@import``) in style elements and attributes, and in
    scripts (``fetch``, ``import``, ``XMLHttpRequest``, sockets, workers). Frames' ``srcdoc``
    pages are read too. ``links=False`` leaves out the ``href`` of links (``<a>``, ``<area>``),
    which load nothing until a reader follows them (a site's links out, for one)."""
    page = parse(html)
    found: list[str] = []
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if not links and tag in ("a", "area") and name == "href":
                continue
            if name in URL_ATTRIBUTES and ABSOLUTE.match(value.strip()):
                found.append(value)
            if name == "style":
                found += [a or b for a, b in CSS_URL.findall(value) if ABSOLUTE.match(a or b)]
        if tag == "iframe" and "srcdoc" in attrs:
            found += fetched_urls(attrs["srcdoc"], links=links)
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "refresh":
            found.append(attrs.get("content", ""))
    for style in page.styles:
        found += [a or b for a, b in CSS_URL.findall(style) if ABSOLUTE.match(a or b)]
    for attrs, text in page.scripts:
        if attrs.get("type") == "application/json":
            continue  # data, not a script
        found += SCRIPT_LOADS.findall(text) + STATIC_IMPORT.findall(text)
    return found


def frames(html: str) -> list[dict[str, str]]:
    """The attributes of each ``<iframe>`` of a display (``srcdoc``: the page, unescaped)."""
    return [attrs for tag, attrs in parse(html).tags if tag == "iframe"]


def page_data(page: str) -> dict:
    """The data inlined in a page (``<script id="qkv-data" type="application/json">``)."""
    (text,) = [t for attrs, t in parse(page).scripts if attrs.get("id") == "qkv-data"]
    return json.loads(text)

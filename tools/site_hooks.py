"""MkDocs hooks (mkdocs.yml, ``hooks``) that keep the built site off the network.

nbconvert's page template, which mkdocs-jupyter renders the tutorials with, carries a script that
imports MermaidJS from cdnjs when a notebook holds a Mermaid diagram. Ours hold none, and the
site must load nothing from the network, so the script is dropped from every page
(``tests/docs/test_site.py`` checks the built pages for any URL a browser would fetch).
"""

from __future__ import annotations

import re
from typing import Any

MERMAID_LOADER = re.compile(
    r"<script type=\"module\">(?:(?!</script>).)*?\.jp-Mermaid(?:(?!</script>).)*?</script>", re.S
)


def on_post_page(output: str, page: Any, config: Any) -> str:
    return MERMAID_LOADER.sub("", output)

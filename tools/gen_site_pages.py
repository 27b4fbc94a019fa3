"""mkdocs-gen-files script (mkdocs.yml, ``gen-files``): writes the generated reference pages
of :mod:`site_reference` into the site being built. Nothing is written to ``docs/``. The
checkout's ``src/`` comes first on the path, so the pages describe the code beside them
whichever ``qkv`` the environment has installed."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]
from site_reference import api_pages, cli_page, configuration_page  # noqa: E402

with mkdocs_gen_files.open("reference/configuration.md", "w") as page:
    page.write(configuration_page())
mkdocs_gen_files.set_edit_path("reference/configuration.md", "tools/site_reference.py")
with mkdocs_gen_files.open("reference/cli.md", "w") as page:
    page.write(cli_page())
mkdocs_gen_files.set_edit_path("reference/cli.md", "tools/site_reference.py")
for name, text in api_pages().items():
    with mkdocs_gen_files.open(f"reference/api/{name}", "w") as page:
        page.write(text)

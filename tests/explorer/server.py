"""For the explorer's tests: serve model directories on a free loopback port, in a thread."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from qkv.explorer.app import create_app
from qkv.explorer.server import background_server
from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import Limits


@contextmanager
def serve_models(dirs: Sequence[str | Path], limits: Limits | None = None) -> Iterator[str]:
    """Load the models in ``dirs`` and serve them; yields the base URL ``http://127.0.0.1:PORT/``
    (the page is at that URL, the API under ``api/``)."""
    app = create_app(ExplorerModels.load(dirs), limits)
    with background_server(app) as url:
        yield url

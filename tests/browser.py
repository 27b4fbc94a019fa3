"""Headless Chromium for the attention page's tests: Debian's ``/usr/bin/chromium`` driven by
Playwright, offline. A test module calls :func:`require_chromium` when it is imported (the
module is skipped where Playwright or Chromium is missing), asks for the module-scoped
:func:`browser` fixture (``tests/conftest.py`` loads this module as a plugin) and opens pages
with :func:`offline_page`, which fails the test on any error the page reports."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-quic"]  # fmt: skip


def require_chromium() -> None:
    """Skip the calling test module where the browser tests cannot run."""
    pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright")
    if not CHROMIUM.is_file():
        pytest.skip(f"the browser tests need Chromium at {CHROMIUM}", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@contextlib.contextmanager
def offline_page(
    browser, *, width: int = 1280, height: int = 900, timeout: int = 10_000, downloads: bool = False
) -> Iterator:
    """A page in a context of its own, offline; an uncaught error or a console error on it
    fails the test when the block ends."""
    context = browser.new_context(viewport={"width": width, "height": height}, offline=True,
                                  accept_downloads=downloads)  # fmt: skip
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_default_timeout(timeout)
    yield page
    context.close()
    assert errors == [], f"the page reported errors: {errors}"

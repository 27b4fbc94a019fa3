"""Screenshots of the built site (``make docs`` first), opened from the file system with the
network off, as a reader opens ``site/`` offline: the home page, a task page, a tutorial (and its
first inline attention view, ``site-tutorial-view.png``) and the configuration reference, saved as
``docs/images/site-*.png``. Each page's errors (an uncaught exception, a console error, a request
that left the machine) are printed, and the search is tried on the configuration reference
(``site-search.png``).

    python tools/site_screenshots.py [--site site] [--out docs/images]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update"]  # fmt: skip
# Screenshot name -> candidate pages, the first that exists is taken.
PAGES = {
    "home": ["index.html"],
    "task": ["tasks/translation.html", "tasks/index.html"],
    "tutorial": [
        "tutorials/seeing-attention.html",
        "tutorials/attention-views.html",
        "tutorials/index.html",
    ],
    "configuration": ["reference/configuration.html"],
}


def shoot(site: Path, out: Path) -> list[str]:
    """Save each page's screenshot; return the problems seen (missing pages, page errors)."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860}, offline=True)
        for name, candidates in PAGES.items():
            found = [site / c for c in candidates if (site / c).is_file()]
            if not found:
                problems.append(f"{name}: none of {candidates} was built")
                continue
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(f"uncaught: {e}"))
            page.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
            page.on("requestfailed", lambda r, errors=errors: errors.append(f"failed: {r.url}"))
            page.goto(found[0].as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(out / f"site-{name}.png"))
            if name == "configuration":  # the search, offline (the iframe-worker shim)
                page.keyboard.press("/")  # Material's search shortcut
                page.keyboard.type("label_smoothing")
                page.wait_for_timeout(1500)
                page.screenshot(path=str(out / "site-search.png"))
            if name == "tutorial":  # the first inline attention view, drawn in its frame
                frame = page.locator("iframe").first
                frame.scroll_into_view_if_needed()
                page.wait_for_timeout(1500)
                page.screenshot(path=str(out / "site-tutorial-view.png"))
            problems += [f"{name} ({found[0].relative_to(site)}): {e}" for e in errors]
            page.close()
        browser.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    if not (args.site / "reference" / "configuration.html").is_file():
        print(f"no built site in {args.site}: run make docs first", file=sys.stderr)
        return 2
    problems = shoot(args.site, args.out)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

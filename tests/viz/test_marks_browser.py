"""Token marks on the attention page, in headless Chromium (offline): the entity tagger's view
(the fixture run's) labels each entity token with its type (data-mark, its colour, its title,
the legend, the hover readout) and leaves the others bare; with "words" on, each word shows its
first piece's mark, and hiding the special tokens keeps the marks with their tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from qkv.tasks.run_dir import load_runner
from qkv.viz.notebook import inline_page
from qkv.viz.view_json import views_json
from tests.browser import offline_page, require_chromium

require_chromium()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.fixture(scope="module")
def result() -> dict:
    _, runner = load_runner(FIXTURES / "ner")  # read only
    seen = runner.views("Mr Kalo is in Venbel .")
    return {"kind": "ner", "output": seen.output, "views": views_json(seen.views[:1])}


@pytest.fixture
def page(browser, result, tmp_path):
    path = tmp_path / "page.html"
    path.write_text(inline_page(result), encoding="utf-8")
    with offline_page(browser) as page:
        page.goto(path.as_uri())
        page.wait_for_selector("#app[data-state=done]")
        yield page


def _labels(page, selector: str) -> list[tuple[str, str | None]]:
    """Each label's text and mark (``None``: unmarked)."""
    found = page.locator(selector).evaluate_all(
        "ls => ls.map(l => [l.textContent, l.getAttribute('data-mark')])"
    )
    return [(text, mark) for text, mark in found]


def test_the_page_shows_the_type_of_each_entity_token(page, result):
    view = result["views"][0]
    rows = _labels(page, ".view .row-label")
    assert [text for text, _ in rows] == view["queries"]
    assert [mark or "" for _, mark in rows] == view["marks"]
    assert ("▁Kalo", "person") in rows and ("▁in", None) in rows
    kalo = page.locator('.row-label[data-mark="person"]', has_text="Kalo").first
    assert (kalo.get_attribute("title") or "").endswith("▁Kalo · person")
    colour = kalo.evaluate("l => getComputedStyle(l).backgroundColor")
    bare = page.locator(".row-label:not([data-mark])").first
    assert colour != bare.evaluate("l => getComputedStyle(l).backgroundColor")
    assert _labels(page, ".view .col-label") == rows
    assert page.locator(".mark-legend .mark-key").all_text_contents() == ["person"]
    kalo.hover()
    assert "“▁Kalo [person]”" in (page.text_content(".readout") or "")


def test_words_take_their_first_pieces_mark_and_hiding_specials_keeps_them(page, result):
    words = result["views"][0]["words"]
    page.locator(".words-toggle").check()
    rows = _labels(page, ".view .row-label")
    assert [text for text, _ in rows] == words["queries"]  # ["<s>", "Mr", "Kalo", "is", ...]
    assert [mark or "" for _, mark in rows] == words["marks"]
    assert ("is", "person") in rows and ("in", None) in rows
    page.locator(".special-toggle").check()
    shown = page.locator(".view").evaluate("v => v.qkvShown")
    assert shown["queries"] == words["queries"][1:-1] and shown["marks"] == words["marks"][1:-1]
    assert [mark or "" for _, mark in _labels(page, ".view .row-label")] == words["marks"][1:-1]

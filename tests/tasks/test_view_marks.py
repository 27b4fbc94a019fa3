"""A tagger's self-attention with its tags marked, on the saved fixture runs
(``tests/fixtures/runs/``, read only): every token of the entity tagger's views carries the type
of the entity its word is in, as the output line's ``[text](type)`` spans report it (read back
here from that line, and the pieces grouped into words here by their ``▁``); the part-of-speech
tagger's carry their words' tags; the saved SVG writes each marked token ``"piece [type]"``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qkv.tasks.run_dir import load_runner
from qkv.tasks.seen import Seen, TokenView
from qkv.tasks.spec import ViewOptions
from tests.viz.test_figure_file import svg_texts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
TEXT = "Mr Kalo is in Venbel ."  # every piece of it in the fixtures' vocabulary
SPECIALS = ("<s>", "</s>")

pytestmark = pytest.mark.usefixtures("one_thread")


def _spans(line: str) -> list[tuple[str, str]]:
    """``(word, type)`` for every word of a spans line (``"" `` outside the brackets)."""
    words: list[tuple[str, str]] = []
    for bracket, kind, plain in re.findall(r"\[([^\]]+)\]\(([^)]+)\)|(\S+)", line):
        words.extend((w, kind) for w in bracket.split()) if bracket else words.append((plain, ""))
    return words


def _piece_words(tokens: list[str]) -> list[int | None]:
    """Each piece's word: a piece starting with ``▁`` opens one; specials belong to none."""
    owners: list[int | None] = []
    word = -1
    for token in tokens:
        word += token.startswith("▁")
        owners.append(None if token in SPECIALS else word)
    return owners


def _expected(view: TokenView, words: list[tuple[str, str]], *, spelled: bool = True) -> list[str]:
    """Each piece's mark: its word's; ``spelled``: the pieces must spell the words (none
    unknown)."""
    owners = _piece_words(view.queries)
    assert max(o for o in owners if o is not None) == len(words) - 1
    if spelled:
        pieces = ["".join(t.removeprefix("▁") for t, o in zip(view.queries, owners, strict=True)
                          if o == w) for w in range(len(words))]  # fmt: skip
        assert pieces == [word for word, _ in words]  # the pieces do spell the line's words
    return ["" if o is None else words[o][1] for o in owners]


def test_the_entity_taggers_views_mark_the_types_its_output_line_reports():
    _, runner = load_runner(FIXTURES / "ner")
    seen = runner.views(TEXT, ViewOptions(rollout=True))
    words = _spans(seen.summary)
    assert {kind for _, kind in words} >= {"", "person"}  # some words in entities, some not
    assert [w for w, _ in words] == TEXT.split()
    for view in seen.views:  # the encoder's, its rollout and its flow
        assert isinstance(view, TokenView) and view.marks == _expected(view, words), view.id


def test_the_part_of_speech_taggers_views_mark_each_token_with_its_words_tag():
    _, runner = load_runner(FIXTURES / "tagging")
    seen = runner.views("a b")
    (view,) = seen.views
    assert isinstance(view, TokenView)
    words = [(word, tag) for word, tag in (pair.rsplit("/", 1) for pair in seen.summary.split())]
    assert view.marks == _expected(view, words, spelled=False)  # "b" is unknown to its vocabulary
    assert view.marks[0] == view.marks[-1] == "" and all(view.marks[1:-1])


def test_the_saved_svg_writes_each_entity_tokens_mark(tmp_path):
    _, runner = load_runner(FIXTURES / "ner")
    seen: Seen = runner.views(TEXT)
    view = seen.views[0]
    assert isinstance(view, TokenView) and view.marks is not None
    texts = set(svg_texts(seen.save(tmp_path / "ner.svg").read_bytes()))
    marked = {f"{t} [{m}]" for t, m in zip(view.queries, view.marks, strict=True) if m}
    assert marked and marked <= texts
    bare = {t for t, m in zip(view.queries, view.marks, strict=True) if not m}
    assert bare <= texts
    words = svg_texts(seen.save(tmp_path / "words.svg", words=True).read_bytes())
    kinds = dict(_spans(seen.summary))
    assert {f"{w} [{kinds[w]}]" if kinds[w] else w for w in TEXT.split()} <= set(words)
    assert any(text.endswith(", pieces merged into words") for text in words)

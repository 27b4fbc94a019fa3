"""Tagged text as ``qkv tag`` prints it, in one of the formats a tagger offers.

- ``words``: ``word/TAG word/TAG ...``, one text a line;
- ``conll``: ``word<TAB>TAG`` a line, a blank line after each text (what
  :func:`qkv.data.labelled.tagged.read_conll` and the entity loaders read back);
- ``json``: one JSON line a text: a part-of-speech tagger's ``[[word, tag], ...]``; an entity
  tagger's ``{"text", "tokens": [[word, tag], ...], "entities": [{"type", "start", "end",
  "text"}, ...]}`` (``start``/``end``: word positions, end exclusive);
- ``spans`` (entity taggers): the text with each entity bracketed and typed,
  ``[Empire State Building](facility) = [ESB](facility) .``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from qkv.evaluation.entities import entities

__all__ = [
    "ENTITY_FORMATS",
    "TAG_FORMATS",
    "check_format",
    "entity_records",
    "render_tagged",
    "spans_text",
]

TAG_FORMATS = ("words", "conll", "json")
ENTITY_FORMATS = ("spans", "words", "conll", "json")

Tagged = Sequence[tuple[str, str]]


def entity_records(tagged: Tagged) -> list[dict[str, Any]]:
    """The entities of one tagged text (BIO tags): type, word span and text."""
    words = [word for word, _ in tagged]
    return [
        {"type": e.type, "start": e.start, "end": e.end, "text": " ".join(words[e.start : e.end])}
        for e in entities([tag for _, tag in tagged])
    ]


def spans_text(tagged: Tagged) -> str:
    """The words of one tagged text with each entity bracketed and typed."""
    words = [word for word, _ in tagged]
    pieces, at = [], 0
    for entity in entity_records(tagged):
        pieces.extend(words[at : entity["start"]])
        pieces.append(f"[{entity['text']}]({entity['type']})")
        at = entity["end"]
    pieces.extend(words[at:])
    return " ".join(pieces)


def check_format(format: str, *, entity_tags: bool) -> None:
    """Refuse a format the tagger does not offer, naming the ones it does."""
    offered = ENTITY_FORMATS if entity_tags else TAG_FORMATS
    if format not in offered:
        what = "an entity tagger" if entity_tags else "a tagger of non-entity tags"
        raise ValueError(f"--format {format!r}: {what} prints {', '.join(offered)}")


def render_tagged(
    texts: Sequence[str], tagged_texts: Sequence[Tagged], format: str, *, entity_tags: bool
) -> list[str]:
    """The lines ``qkv tag`` prints for ``tagged_texts`` (the tagged ``texts``) in ``format``;
    ``entity_tags``: the tags are BIO entity tags (``spans`` and the entities in ``json``).

    Raises:
        ValueError: a format the tagger does not offer, the offered ones named.
    """
    check_format(format, entity_tags=entity_tags)
    lines: list[str] = []
    for text, tagged in zip(texts, tagged_texts, strict=True):
        pairs = [[word, tag] for word, tag in tagged]
        if format == "words":
            lines.append(" ".join(f"{word}/{tag}" for word, tag in tagged))
        elif format == "conll":
            lines.extend(f"{word}\t{tag}" for word, tag in tagged)
            lines.append("")
        elif format == "spans":
            lines.append(spans_text(tagged))
        elif entity_tags:
            row = {"text": text, "tokens": pairs, "entities": entity_records(tagged)}
            lines.append(json.dumps(row, ensure_ascii=False))
        else:
            lines.append(json.dumps(pairs, ensure_ascii=False))
    return lines

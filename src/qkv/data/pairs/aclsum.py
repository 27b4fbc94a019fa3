"""ACLSum (Takeshita et al. 2024, "ACLSum: A New Dataset for Aspect-based Summarization of
Scientific Publications", NAACL 2024): 250 ACL Anthology papers, each with three human
summaries of one or two sentences, one per aspect (``challenge``, ``approach``, ``outcome``;
9 to 25 words, 22 on average), and the sentences of its abstract, introduction and
conclusion.

Read from the ``aclsum==0.1.2`` wheel on PyPI (MIT; fetched into qkv's cache with ``pip
download`` on first use, read with :mod:`zipfile`; the package needs Python >= 3.11 and
another package to import, so it is never installed or imported): the JSON-lines files
``aclsum/dataset/{train,val,test}.jsonl``, 100 / 50 / 100 papers, one object a line with

- ``id`` (the Anthology id, ``"P06-1112"``) and ``title``;
- ``summary``: ``{aspect: text}`` for the three aspects;
- ``sentences``: ``{section: [sentence, ...]}`` for ``abstract``, ``introduction`` and
  ``conclusion`` (145, 683 and 182 words on average, 1,010 for the three); the sentences are
  tokenised as the package ships them (``"answer extraction ."``), the summaries are not;
- ``highlights``: ``{aspect: {section: [0 or 1 per sentence]}}``, the sentences highlighted
  for the aspect (extractive labels, 1 = highlighted);
- ``heuristic_highlights``: a second set of labels of the same shape (not read here).

:func:`load_aclsum` pairs a document (one section's sentences, or ``"all"``: abstract,
introduction and conclusion in that order, the package's own ``get_all_sentences()``), its
sentences joined by single spaces, with one aspect's summary; the splits are the package's
own (``val`` is ``valid``). No paper is in two splits.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.data.errors import DataError, check_field_length, decode_utf8
from qkv.data.pairs.parallel import ParallelCorpus
from qkv.data.sources.packages import fetch_wheel, read_wheel_member

__all__ = [
    "ACLSUM_MEMBERS",
    "ACLSUM_REQUIREMENT",
    "ACLSUM_WHEEL",
    "ASPECTS",
    "DOCUMENTS",
    "SECTIONS",
    "AclsumPaper",
    "load_aclsum",
    "parse_aclsum_lines",
    "read_aclsum",
]

logger = logging.getLogger(__name__)

ACLSUM_REQUIREMENT = "aclsum==0.1.2"
ACLSUM_WHEEL = "aclsum-0.1.2-py3-none-any.whl"
ACLSUM_MEMBERS = {
    "train": "aclsum/dataset/train.jsonl",
    "valid": "aclsum/dataset/val.jsonl",
    "test": "aclsum/dataset/test.jsonl",
}
"""The wheel's file for each of qkv's splits."""
ASPECTS = ("challenge", "approach", "outcome")
SECTIONS = ("abstract", "introduction", "conclusion")
DOCUMENTS = (*SECTIONS, "all")
"""What :func:`load_aclsum` can summarise: one section, or the three in order (``"all"``)."""


@dataclass(frozen=True)
class AclsumPaper:
    """One paper of ACLSum.

    Attributes:
        id: its ACL Anthology id.
        title: its title.
        summaries: ``{aspect: summary}`` for the three :data:`ASPECTS`.
        sentences: ``{section: sentences}`` for the three :data:`SECTIONS`, each non-empty.
        highlights: ``{aspect: {section: labels}}``, a 0/1 label per sentence of the section.
    """

    id: str
    title: str
    summaries: dict[str, str]
    sentences: dict[str, tuple[str, ...]]
    highlights: dict[str, dict[str, tuple[int, ...]]]

    def document(self, document: str) -> str:
        """The text of ``document`` (one of :data:`DOCUMENTS`): its sentences joined by
        spaces."""
        sections = SECTIONS if document == "all" else (document,)
        return " ".join(s for section in sections for s in self.sentences[section])


def _field(where: str, row: dict[str, Any], key: str, kind: type) -> Any:
    if key not in row:
        raise DataError(f"{where}: no {key!r} field (fields: {', '.join(map(str, row))})")
    value = row[key]
    if not isinstance(value, kind):
        raise DataError(f"{where}: {key!r} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: expected a non-empty string, got {str(value)[:60]!r}")
    check_field_length(where, value)
    return " ".join(value.split())


def _paper(where: str, row: object) -> AclsumPaper:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got a {type(row).__name__}")
    id_ = _text(f"{where}: id", _field(where, row, "id", str))
    summary = _field(where, row, "summary", dict)
    sentences = _field(where, row, "sentences", dict)
    highlights = _field(where, row, "highlights", dict)
    for key, held, wanted in (
        ("summary", summary, ASPECTS),
        ("sentences", sentences, SECTIONS),
        ("highlights", highlights, ASPECTS),
    ):
        if sorted(held) != sorted(wanted):
            raise DataError(
                f"{where} ({id_}): {key!r} has keys {sorted(held)}, expected {sorted(wanted)}"
            )
    texts: dict[str, tuple[str, ...]] = {}
    for section in SECTIONS:
        listed = sentences[section]
        if not isinstance(listed, list) or not listed:
            raise DataError(f"{where} ({id_}): sentences[{section!r}] is not a non-empty list")
        texts[section] = tuple(
            _text(f"{where} ({id_}): sentences[{section!r}][{i}]", s) for i, s in enumerate(listed)
        )
    labels: dict[str, dict[str, tuple[int, ...]]] = {}
    for aspect in ASPECTS:
        labels[aspect] = {}
        for section in SECTIONS:
            held = highlights[aspect]
            marks = held.get(section) if isinstance(held, dict) else None
            n = len(texts[section])
            if not (
                isinstance(marks, list)
                and len(marks) == n
                and all(type(m) is int and m in (0, 1) for m in marks)
            ):
                raise DataError(
                    f"{where} ({id_}): highlights[{aspect!r}][{section!r}] must be {n} labels "
                    f"of 0 or 1 (one per sentence), got {str(marks)[:60]}"
                )
            labels[aspect][section] = tuple(marks)
    return AclsumPaper(
        id=id_,
        title=_text(f"{where} ({id_}): title", _field(where, row, "title", str)),
        summaries={a: _text(f"{where} ({id_}): summary[{a!r}]", summary[a]) for a in ASPECTS},
        sentences=texts,
        highlights=labels,
    )


def parse_aclsum_lines(where: str, text: str) -> list[AclsumPaper]:
    """The papers of one ACLSum JSON-lines file (``where`` names it in errors); blank lines
    are skipped.

    Raises:
        DataError: naming ``where`` and the line: not JSON, not an object, a missing or
            mistyped field, an empty text, highlight labels that do not match the sentences,
            or no paper at all.
    """
    papers = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{where}:{number}: not a JSON object ({error.msg} at column {error.colno}): "
                f"{line[:60]!r}"
            ) from None
        papers.append(_paper(f"{where}:{number}", row))
    if not papers:
        raise DataError(f"{where}: no papers")
    return papers


def read_aclsum(wheel: str | Path | None = None) -> dict[str, list[AclsumPaper]]:
    """``{"train": papers, "valid": papers, "test": papers}`` from the wheel (by default the
    cached one, fetched with ``pip download`` when missing).

    Raises:
        DataError: an unreadable wheel or file (named), or a paper id in two splits.
        DatasetUnavailable: the wheel is not cached and cannot be fetched.
    """
    source = Path(fetch_wheel(ACLSUM_REQUIREMENT, ACLSUM_WHEEL) if wheel is None else wheel)
    splits = {}
    seen: dict[str, str] = {}
    for split, member in ACLSUM_MEMBERS.items():
        where = f"{source}:{member}"
        text = decode_utf8(where, read_wheel_member(source, member))
        splits[split] = parse_aclsum_lines(where, text)
        for paper in splits[split]:
            if paper.id in seen:
                raise DataError(f"{where}: paper {paper.id} is also in the {seen[paper.id]} split")
            seen[paper.id] = split
    return splits


def load_aclsum(
    aspect: str = "outcome", document: str = "abstract", *, wheel: str | None = None
) -> ParallelCorpus:
    """``(document text, aspect summary)`` pairs, one per paper, in the package's splits.

    Args:
        aspect: the summary to produce, one of :data:`ASPECTS`.
        document: what to summarise, one of :data:`DOCUMENTS`: ``"abstract"`` (about 145
            words), ``"introduction"``, ``"conclusion"``, or ``"all"`` (the three, about 1,000
            words).
        wheel: the ``aclsum-0.1.2-py3-none-any.whl`` to read; by default the cached one.

    Returns:
        a :class:`~qkv.data.pairs.parallel.ParallelCorpus` named ``aclsum-{aspect}-{document}`` of
        100 / 50 / 100 pairs, each split in the file's order.

    Raises:
        DataError: an unknown ``aspect`` or ``document`` (the choices listed), or a malformed
            file (named, with the line).
        DatasetUnavailable: the wheel is not cached and cannot be fetched.
    """
    if aspect not in ASPECTS:
        raise DataError(f"aspect={aspect!r} is not an ACLSum aspect; choose one of {ASPECTS}")
    if document not in DOCUMENTS:
        raise DataError(
            f"document={document!r} is not an ACLSum document; choose one of {DOCUMENTS} "
            "('all': abstract, introduction and conclusion)"
        )
    papers = read_aclsum(wheel)
    pairs = {s: [(p.document(document), p.summaries[aspect]) for p in papers[s]] for s in papers}
    logger.info(
        "aclsum %s of the %s: %d/%d/%d train/valid/test papers",
        aspect,
        document,
        *(len(pairs[s]) for s in ACLSUM_MEMBERS),
    )
    return ParallelCorpus(
        name=f"aclsum-{aspect}-{document}",
        source_lang="en",
        target_lang="en",
        train=pairs["train"],
        valid=pairs["valid"],
        test=pairs["test"],
        split_note=(
            f"the aclsum 0.1.2 package's own splits (train.jsonl, val.jsonl, test.jsonl); "
            f"source: the {document} sentences, target: the human {aspect} summary"
        ),
    )

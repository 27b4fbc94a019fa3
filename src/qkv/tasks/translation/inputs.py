"""A translator's source texts as ids, after the checks every translator makes (the module
path's :class:`~qkv.tasks.translation.runner.Translator` and the CTranslate2 engine share them)."""

from __future__ import annotations

from qkv.data import SubwordTokenizer
from qkv.data.tokens.special import UNK_ID
from qkv.tasks.input_checks import (
    NOTHING_READ,
    LengthLimits,
    check_lengths,
    refuse_absurd,
    warn_empty,
    warn_unknown,
)

__all__ = ["SPLIT_ADVICE", "source_ids"]

SPLIT_ADVICE = "split it into sentences and translate those"


def source_ids(
    texts: list[str],
    tokenizer: SubwordTokenizer,
    limits: LengthLimits | None,
    *,
    longest: int,
    single: bool = False,
    stacklevel: int = 4,
) -> list[list[int]]:
    """The source ids of each text (no EOS), after the checks every translator makes: far too
    long is an error before tokenizing (``longest``: the most characters one token holds),
    over the trained length warns (``limits``; ``None``: no length checks), mostly unknown
    tokens warn. ``stacklevel`` points the warnings at the caller's caller."""
    if limits is not None:
        refuse_absurd(texts, limits, chars_per_token=longest, advice=SPLIT_ADVICE, single=single)
    warn_empty(texts, consequence=NOTHING_READ, single=single, stacklevel=stacklevel)
    ids = [tokenizer.encode(text) for text in texts]
    if limits is not None:
        check_lengths(
            [len(row) for row in ids],
            texts,
            limits,
            advice=SPLIT_ADVICE,
            consequence="translations this long may stop short or go astray; split long "
            "texts into sentences",
            single=single,
            stacklevel=stacklevel,
        )
    warn_unknown(
        ids,
        texts,
        UNK_ID,
        consequence="the model cannot read them, so their translations mean little",
        single=single,
        stacklevel=stacklevel,
    )
    return ids

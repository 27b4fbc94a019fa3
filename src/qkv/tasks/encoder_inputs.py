"""Text to encoder inputs: ``[CLS] tokens [SEP]`` ids, words aligned to their first subword,
and padded batches with their ``keep`` mask. Shared by classification and tagging.

Two vocabularies feed an encoder:

- ``bpe``: a BPE vocabulary trained on the task's training text (:class:`.SubwordTokenizer`,
  specials at ids 0-3); ``<s>`` (id 1) plays ``[CLS]`` and ``</s>`` (id 2) plays ``[SEP]``;
- ``pretrained``: the ``tokenizer.json`` of a pretrained encoder (MiniLM's WordPiece, with its
  own ``[CLS]``, ``[SEP]`` and ``[PAD]`` ids and its lower-casing normaliser).

Both are read through the ``tokenizers`` library and wrapped the same way, so the rest of a task
never asks which one it has. A tagger labels words, not subwords: :meth:`TextInputs.encode_words`
encodes pre-split words and returns the position of each word's first subword, where its tag is
predicted (as BERT taggers do); a sentence longer than ``max_len`` is cut into windows of whole
words (:meth:`TextInputs.word_windows`), so no word is ever dropped.

``max_len`` is the length the model was trained on (``data.max_len``); a classifier cuts longer
texts to it, a tagger splits them into windows, and both say so with an
:class:`~qkv.tasks.input_checks.InputWarning` (:meth:`TextInputs.encode_texts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from qkv.attention.masks import padding_mask
from qkv.data.errors import DataError
from qkv.data.tokens.special import BOS_ID, EOS_ID, PAD_ID
from qkv.tasks.input_checks import leading_words, warn_long, warn_unknown
from qkv.tasks.windows import overlapping_windows


@dataclass(frozen=True)
class EncoderBatch:
    """``ids (B, T)`` padded, ``keep (B, T)`` True on real tokens, ``labels``: ``(B,)`` class
    ids, or ``(B, T)`` tag ids with ``-100`` where no tag is predicted (specials, padding and
    non-initial subwords)."""

    ids: Tensor
    keep: Tensor
    labels: Tensor | None = None

    def to(self, device: torch.device | str) -> EncoderBatch:
        labels = None if self.labels is None else self.labels.to(device)
        return EncoderBatch(self.ids.to(device), self.keep.to(device), labels)


IGNORE = -100  # the label of positions that carry no tag (F.cross_entropy's ignore_index)


class TextInputs:
    """A ``tokenizers.Tokenizer`` with the special ids an encoder needs.

    Args:
        tokenizer: the backend; its own post-processor is never used (specials are added here).
        cls_id, sep_id, pad_id: the ids of ``[CLS]``, ``[SEP]`` and padding.
        max_len: the most ids one input may have, specials included (the model's positions).
    """

    def __init__(
        self, tokenizer, *, cls_id: int, sep_id: int, pad_id: int, max_len: int, kind: str
    ) -> None:
        if max_len < 3:
            raise ValueError(f"max_len must be >= 3 ([CLS], one token, [SEP]), got {max_len}")
        self.tokenizer, self.kind, self.max_len = tokenizer, kind, max_len
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id

    @classmethod
    def load(cls, path: str | Path, *, kind: str, max_len: int) -> TextInputs:
        """Read ``tokenizer.json``: a qkv BPE vocabulary (``kind="bpe"``) or a pretrained
        encoder's (``kind="pretrained"``: ``[CLS]``, ``[SEP]`` and ``[PAD]`` must exist)."""
        import tokenizers

        path = Path(path)
        try:
            tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as error:  # the tokenizers library raises plain Exceptions
            raise DataError(f"{path} is not a readable tokenizer.json: {error}") from None
        return cls._wrap(tokenizer, kind=kind, max_len=max_len, source=str(path))

    @classmethod
    def from_json(cls, text: str, *, kind: str, max_len: int, source: str) -> TextInputs:
        """As :meth:`load`, from the text of a ``tokenizer.json`` (``source`` names it in
        errors)."""
        import tokenizers

        try:
            tokenizer = tokenizers.Tokenizer.from_str(text)
        except Exception as error:
            raise DataError(f"{source} is not a readable tokenizer.json: {error}") from None
        return cls._wrap(tokenizer, kind=kind, max_len=max_len, source=source)

    @classmethod
    def _wrap(cls, tokenizer, *, kind: str, max_len: int, source: str) -> TextInputs:
        tokenizer.no_padding()  # batches are padded here, and cut to max_len here
        tokenizer.no_truncation()
        if kind == "bpe":
            tokenizer.encode_special_tokens = True  # text spelling "<s>" stays plain text
            return cls(
                tokenizer, cls_id=BOS_ID, sep_id=EOS_ID, pad_id=PAD_ID, max_len=max_len, kind=kind
            )
        if kind != "pretrained":
            raise ValueError(f"tokenizer kind must be bpe or pretrained, got {kind!r}")
        ids = {name: tokenizer.token_to_id(name) for name in ("[CLS]", "[SEP]", "[PAD]")}
        missing = [name for name, value in ids.items() if value is None]
        if missing:
            raise DataError(f"{source} has no {', '.join(missing)} token; a BERT vocabulary has")
        return cls(
            tokenizer,
            cls_id=ids["[CLS]"],
            sep_id=ids["[SEP]"],
            pad_id=ids["[PAD]"],
            max_len=max_len,
            kind=kind,
        )

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def unk_id(self) -> int | None:
        """The id of the unknown token (``None`` if the vocabulary has none)."""
        return self.tokenizer.token_to_id("[UNK]" if self.kind == "pretrained" else "<unk>")

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode(self, text: str) -> tuple[list[int], bool]:
        """``[CLS] subwords [SEP]`` for one text, cut to ``max_len``; and whether it was cut.

        Only the start of a text of many words is tokenized (:func:`leading_words`; the same
        first tokens), so a text of millions of words costs no more than a long sentence.
        """
        budget = self.max_len - 2
        head = leading_words(text, 2 * budget)
        ids = self._ids(head)
        if head is not text and len(ids) <= budget:  # words that gave no token: read it all
            ids = self._ids(text)
        return [self.cls_id, *ids[:budget], self.sep_id], len(ids) > budget

    def encode_texts(
        self, texts: Sequence[str], *, unknown: str, single: bool = False, stacklevel: int = 4
    ) -> list[list[int]]:
        """:meth:`encode` each text, with one warning naming the texts cut to ``max_len`` and
        one naming those made mostly of unknown tokens (``unknown``: what that means for the
        task's output). Warnings point ``stacklevel`` frames up (4: the caller's caller)."""
        encoded = [self.encode(text) for text in texts]
        rows = [ids for ids, _ in encoded]
        warn_long(
            [i for i, (_, cut) in enumerate(encoded) if cut],
            texts,
            self.max_len,
            unit="ids",
            consequence=f"cut to their first {self.max_len} ids ([CLS] and [SEP] included)",
            single=single,
            stacklevel=stacklevel,
        )
        inner = [ids[1:-1] for ids in rows]  # without [CLS] and [SEP]
        warn_unknown(
            inner, texts, self.unk_id, consequence=unknown, single=single, stacklevel=stacklevel
        )
        return rows

    def subwords(self, words: Sequence[str]) -> list[list[int]]:
        """The subword ids of each word (a word the vocabulary cannot spell gets its unknown
        id, so every word has at least one)."""
        if not words:
            return []
        encoding = self.tokenizer.encode(
            list(words), is_pretokenized=True, add_special_tokens=False
        )
        pieces: list[list[int]] = [[] for _ in words]
        for token, word in zip(encoding.ids, encoding.word_ids, strict=True):
            if word is not None:
                pieces[word].append(token)
        unknown = self.unk_id
        return [p or [unknown if unknown is not None else self.sep_id] for p in pieces]

    def word_windows(self, words: Sequence[str], overlap: int = 0) -> list[tuple[int, int]]:
        """``(start, end)`` word spans covering ``words`` in order, each fitting ``max_len``
        with its specials (one window unless the sentence is long); neighbouring windows share
        up to ``overlap`` subwords (:func:`~qkv.tasks.windows.overlapping_windows`; 0: none)."""
        if not words:
            return [(0, 0)]
        budget = self.max_len - 2
        sizes = [min(len(piece), budget) for piece in self.subwords(words)]  # a giant word is cut
        return overlapping_windows(sizes, budget, overlap)

    def encode_words(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """``[CLS] subwords [SEP]`` for pre-split ``words`` (which must fit ``max_len``; see
        :meth:`word_windows`) and the position of each word's first subword."""
        ids, first = [self.cls_id], []
        for piece in self.subwords(words):
            first.append(len(ids))
            ids.extend(piece[: self.max_len - 2])
        if len(ids) + 1 > self.max_len:
            raise ValueError(
                f"{len(words)} words need {len(ids) + 1} ids, more than max_len={self.max_len}; "
                "split them with word_windows()"
            )
        return [*ids, self.sep_id], first


def collate(
    rows: Sequence[Sequence[int]], pad_id: int, labels: Tensor | None = None
) -> EncoderBatch:
    """Pad id lists to ``(B, T)`` on the right; ``keep`` marks the real tokens."""
    if not rows:
        raise ValueError("cannot collate an empty batch")
    longest = max(len(r) for r in rows)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    for row, values in enumerate(rows):
        ids[row, : len(values)] = torch.as_tensor(values, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows])
    return EncoderBatch(ids, padding_mask(lengths, longest)[:, 0, 0], labels)  # keep (B, T)

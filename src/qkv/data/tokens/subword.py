"""Subword tokenizer: byte-pair encoding, Sennrich et al. 2016, over the ``tokenizers`` library.

BPE starts from single characters and repeatedly merges the most frequent adjacent pair until the
vocabulary reaches ``vocab_size``. The pipeline is fixed:

- normalizer: Unicode NFKC (full-width forms, ligatures and compatibility characters fold to
  their plain spelling);
- pre-tokenizer: Metaspace, which turns each space into ``▁`` and makes it part of the next
  word's first piece (``"le monde"`` -> ``▁le ▁monde``), so decoding restores the spacing exactly
  and pieces read well on attention plots; then punctuation is split off
  (``"monde."`` -> ``▁monde .``), so a word and its punctuated forms share pieces;
- model: BPE with ``<unk>`` for characters never seen in training;
- special tokens ``<pad> <s> </s> <unk>`` at ids 0-3 (``qkv.data.tokens.special``). ``encode`` adds
  none of
  them: BOS/EOS are added when batches are built (``qkv.data.pairs.batching``).

The ``tokenizers`` package is optional (``pip install 'qkv[text]'``); it is imported only when a
tokenizer is trained or loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

from qkv.data.errors import DataError
from qkv.data.tokens.special import SPECIAL_TOKENS, UNK_TOKEN

if TYPE_CHECKING:
    import tokenizers

__all__ = ["MAX_VOCAB_SIZE", "TOKENIZER_FILENAME", "SubwordTokenizer", "check_vocab_size"]

logger = logging.getLogger(__name__)

TOKENIZER_FILENAME = "tokenizer.json"
_METASPACE = "▁"
# The largest vocabulary a tokenizer is trained for: above any in use (GPT-4's has about 100,000
# ids, Gemma's 256,000). The tokenizers library reserves memory for the whole vocabulary up
# front and aborts the process, with no exception to catch, when it cannot (10**12 ids).
MAX_VOCAB_SIZE = 1_000_000


def _tokenizers_module() -> ModuleType:
    try:
        import tokenizers
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "SubwordTokenizer needs the `tokenizers` package: pip install 'tokenizers>=0.15.1' "
            "(or pip install 'qkv[text]')"
        ) from err
    return tokenizers


class SubwordTokenizer:
    """A trained BPE tokenizer mapping text to ids in ``[0, vocab_size)`` and back.

    Build one with :meth:`train` or :meth:`load`; the constructor wraps an existing
    ``tokenizers.Tokenizer``, checks that the special tokens sit at ids 0-3, and sets its
    ``encode_special_tokens`` so that input text spelling ``<s>`` is encoded as plain characters.
    """

    def __init__(self, tokenizer: tokenizers.Tokenizer) -> None:
        for expected_id, token in enumerate(SPECIAL_TOKENS):
            found = tokenizer.token_to_id(token)
            if found != expected_id:
                raise DataError(
                    f"special token {token!r} must have id {expected_id}, found id {found}; "
                    f"qkv tokenizers put {SPECIAL_TOKENS} at ids 0-{len(SPECIAL_TOKENS) - 1}"
                )
        # Text that happens to spell "<s>" or "<unk>" is ordinary text, never a special id.
        tokenizer.encode_special_tokens = True
        self._tokenizer = tokenizer

    # ----------------------------------------------------------------- building

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        *,
        min_frequency: int = 2,
        byte_level: bool = False,
    ) -> SubwordTokenizer:
        """Learn a BPE vocabulary of at most ``vocab_size`` ids (special tokens included).

        Args:
            texts: training sentences (any iterable, read once).
            vocab_size: the largest vocabulary wanted; must exceed the 4 special tokens. If the
                text has more distinct characters than fit, the rarest become ``<unk>``.
            min_frequency: a pair must occur this often to be merged.
            byte_level: GPT-2's byte-level BPE (for language models): every byte has an id, so
                no text is unknown and decoding gives back the text exactly, newlines and
                spaces included. It needs ``vocab_size >= 260`` (4 special ids + 256 bytes).

        Raises:
            ValueError: ``vocab_size`` too small, ``min_frequency < 1``, or no non-empty text.
        """
        n_special = len(SPECIAL_TOKENS)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise ValueError(f"vocab_size must be an int, got {vocab_size!r}")
        if vocab_size <= n_special:
            raise ValueError(
                f"vocab_size={vocab_size} is too small: it must exceed the {n_special} special "
                f"tokens {SPECIAL_TOKENS}"
            )
        if vocab_size > MAX_VOCAB_SIZE:
            raise ValueError(
                f"vocab_size={vocab_size} is too large: at most {MAX_VOCAB_SIZE:,} ids (larger "
                "than any vocabulary in use)"
            )
        if min_frequency < 1:
            raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
        tk = _tokenizers_module()
        if byte_level:
            alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
            if vocab_size < n_special + len(alphabet):
                raise ValueError(
                    f"vocab_size={vocab_size} is too small for byte-level BPE: it needs at least "
                    f"{n_special + len(alphabet)} (4 special ids + {len(alphabet)} bytes)"
                )
            tokenizer = tk.Tokenizer(tk.models.BPE())
            tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
            tokenizer.decoder = tk.decoders.ByteLevel()
            trainer = tk.trainers.BpeTrainer(
                vocab_size=vocab_size,
                min_frequency=min_frequency,
                special_tokens=list(SPECIAL_TOKENS),
                initial_alphabet=alphabet,
                show_progress=False,
            )
            return cls._fit(tokenizer, trainer, texts, vocab_size)
        tokenizer = tk.Tokenizer(tk.models.BPE(unk_token=UNK_TOKEN))
        tokenizer.normalizer = tk.normalizers.NFKC()
        # Metaspace splits at spaces and marks word starts with "▁"; Punctuation then isolates
        # punctuation ("monde," -> "▁monde" ","), so "fils", "fils," and "fils." share one piece.
        tokenizer.pre_tokenizer = tk.pre_tokenizers.Sequence(
            [
                tk.pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always"),
                tk.pre_tokenizers.Punctuation(),
            ]
        )
        tokenizer.decoder = tk.decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always")
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            # Keep at most this many characters so the vocabulary never exceeds vocab_size.
            limit_alphabet=vocab_size - n_special,
            show_progress=False,
        )
        return cls._fit(tokenizer, trainer, texts, vocab_size)

    @classmethod
    def _fit(
        cls,
        tokenizer: tokenizers.Tokenizer,
        trainer: tokenizers.trainers.Trainer,
        texts: Iterable[str],
        size: int,
    ) -> SubwordTokenizer:
        counts = {"texts": 0, "chars": 0}

        def counted(items: Iterable[str]) -> Iterator[str]:
            for text in items:
                if not isinstance(text, str):
                    raise TypeError(f"training texts must be str, got {type(text).__name__}")
                counts["texts"] += 1
                counts["chars"] += len(text.strip())
                yield text

        tokenizer.train_from_iterator(counted(texts), trainer=trainer)
        if counts["chars"] == 0:
            raise ValueError(
                f"cannot train a tokenizer on empty text: got {counts['texts']} texts with "
                "no non-space characters"
            )
        logger.info(
            "trained BPE tokenizer: %d ids from %d texts (asked for %d)",
            tokenizer.get_vocab_size(),
            counts["texts"],
            size,
        )
        return cls(tokenizer)

    # ----------------------------------------------------------------- text <-> ids

    @property
    def vocab_size(self) -> int:
        """Number of ids ``V``; every id is in ``[0, V)``."""
        return self._tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, without BOS/EOS. Unknown characters become ``UNK_ID``."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]``, computed in parallel by ``tokenizers``."""
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_batch takes str items, got {type(text).__name__}")
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [enc.ids for enc in encodings]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (a list or a 1-d tensor); every special token, ``<unk>`` included, is
        skipped, and spaces are restored from the ``▁`` markers."""
        return self._tokenizer.decode(self._check_ids(ids), skip_special_tokens=True)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """One readable string per id, e.g. ``["▁le", "▁mon", "de", "</s>"]``, for plot labels.

        ``▁`` marks the start of a word; special tokens appear as written (``<unk>``, ``</s>``).
        """
        # _check_ids keeps every id inside the vocabulary, where id_to_token never gives None.
        return [cast(str, self._tokenizer.id_to_token(i)) for i in self._check_ids(ids)]

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        values = [int(i) for i in ids]
        size = self.vocab_size
        for position, value in enumerate(values):
            if not 0 <= value < size:
                raise ValueError(
                    f"id {value} at position {position} is outside the vocabulary [0, {size})"
                )
        return values

    # ----------------------------------------------------------------- persistence

    def save(self, path: str | Path) -> Path:
        """Write the tokenizer as one JSON file and return its path.

        ``path`` ending in ``.json`` is the file itself; anything else is a directory (created if
        needed) that receives ``tokenizer.json``.
        """
        path = Path(path)
        if path.suffix != ".json":
            path.mkdir(parents=True, exist_ok=True)
            path = path / TOKENIZER_FILENAME
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._tokenizer.save(str(path))
        return path

    @classmethod
    def load(cls, path: str | Path) -> SubwordTokenizer:
        """Read a tokenizer written by :meth:`save` (the JSON file or its directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / TOKENIZER_FILENAME
        if not path.is_file():
            raise DataError(f"no tokenizer file at {path}")
        tk = _tokenizers_module()
        try:
            tokenizer = tk.Tokenizer.from_file(str(path))
        except Exception as err:  # tokenizers raises a bare Exception on bad JSON
            raise DataError(f"{path} is not a valid tokenizer file: {err}") from err
        return cls(tokenizer)

    def to_json(self) -> str:
        """The tokenizer as a JSON string (the content of ``tokenizer.json``), for checkpoints."""
        return self._tokenizer.to_str()

    @classmethod
    def from_json(cls, text: str) -> SubwordTokenizer:
        """Inverse of :meth:`to_json`."""
        tk = _tokenizers_module()
        try:
            tokenizer = tk.Tokenizer.from_str(text)
        except Exception as err:
            raise DataError(f"not a valid tokenizer JSON string: {err}") from err
        return cls(tokenizer)

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size})"


def check_vocab_size(path: str | Path, tokenizer_size: int, model_size: int) -> None:
    """Refuse the tokenizer read from ``path`` unless it has as many ids as the model's
    vocabulary: one copied from another model's directory would feed the model ids it does
    not have, or ids that mean other words.

    Raises:
        DataError: naming the file and both sizes.
    """
    if tokenizer_size != model_size:
        raise DataError(
            f"{path} has {tokenizer_size:,} ids but the model's vocabulary has {model_size:,}: "
            "it is another model's tokenizer; keep the files of a model directory together "
            "(or train the model again)"
        )

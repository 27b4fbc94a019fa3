"""Copying from the source, with coverage: See, Liu and Manning 2017, "Get To The Point:
Summarization with Pointer-Generator Networks", eq. (8)-(13).

At decoder step ``t`` the copy head attends over the encoder states ``h_i`` with the decoder's
output ``s_t`` and mixes two distributions with a generation probability ``p_gen``:

    e_i^t  = v^T tanh(W_h h_i + W_s s_t + w_c c_i^t + b)     (eq. 1, with coverage eq. 11)
    a^t    = softmax(e^t)                                     (over the real source tokens)
    h*_t   = sum_i a_i^t h_i                                  (eq. 2)
    p_gen  = sigmoid(w_h*^T h*_t + w_s^T s_t + w_x^T x_t + b_ptr)                 (eq. 8)
    P(w)   = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t               (eq. 9)
    c^t    = sum_{t' < t} a^{t'}                              (coverage, eq. 10)
    covloss_t = sum_i min(a_i^t, c_i^t)                       (eq. 12)

``x_t`` is the decoder's input at step ``t`` (the embedding of ``y_{t-1}``). ``P_vocab`` is the
model's own output distribution, so with ``p_gen = 1`` the model is the plain one exactly.

The extended vocabulary: a source word outside the vocabulary of ``V`` words gets the id
``V + k`` (its ``k``-th distinct out-of-vocabulary word in that source), so it can be copied
although it cannot be generated; :class:`CopySource` carries those ids as ``ext``. ``P_vocab``
is zero beyond ``V``; the copy term is zero for every id no source token of the row holds.

Which attention copies: by default the head has its own (``attention=True``; both the RNN
decoder and the Transformer use it), so coverage acts on the attention that copies while the
decoder's attention, which makes the context the generator reads, is left as it was. See et
al.'s RNN shares ONE attention: the decoder's ``a^t`` makes ``h*_t`` for ``P_vocab`` and is also
the copy distribution, with coverage in that attention's score. A head built with
``attention=False`` is that: it holds only the gate (``p_gen``), and :meth:`CopyHead.shared`
takes the decoder's weights and context as ``a^t`` and ``h*_t``; the decoder carries the coverage
(:class:`~qkv.layers.recurrent_decoders.BahdanauDecoder` with ``coverage=True``) and
:func:`coverage_losses` computes eq. 12 from its weights.

Probabilities are mixed in log space (``logaddexp`` of the two weighted terms), finite in
training: a zero probability is the dtype's lowest value there, so gradients never meet
``log(0)``; :func:`extended_log_probs`, for decoding, reports it as ``-inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.attention.core import attend
from qkv.attention.scores import Additive

__all__ = [
    "CopyEncoding",
    "CopyHead",
    "CopyOutput",
    "CopySource",
    "CopyState",
    "check_extended_ids",
    "copy_encoding",
    "coverage_losses",
    "extended_log_probs",
    "fed_ids",
    "gold_log_probs",
]


@dataclass(frozen=True)
class CopySource:
    """What the copy head reads of a batch of sources (once per batch), and the coverage so far.

    Attributes:
        memory: ``(B, S, Dm)`` encoder states ``h_i``.
        keys: ``(B, S, A)`` ``W_h h_i + b``, prepared once per batch; ``None`` for a head that
            copies with the decoder's attention.
        keep: ``(B, 1, S)`` boolean, ``True`` at real source tokens.
        ext: ``(B, S)`` long: each source token's id in the extended vocabulary.
        extended_size: ``Vx``, the vocabulary size plus the batch's most out-of-vocabulary slots.
        coverage: ``(B, S)`` ``c^t``, the attention summed over past steps; ``None`` without
            coverage.
    """

    memory: Tensor
    keys: Tensor | None
    keep: Tensor
    ext: Tensor
    extended_size: int
    coverage: Tensor | None = None

    def index_select(self, index: Tensor) -> CopySource:
        """Rows ``index (B',)`` of every tensor (reorder, drop or repeat hypotheses)."""
        rows: dict[str, Any] = {}  # each field's value: a tensor, an int or None
        for f in fields(self):
            value = getattr(self, f.name)
            rows[f.name] = value.index_select(0, index) if isinstance(value, Tensor) else value
        return CopySource(**rows)


@dataclass(frozen=True)
class CopyOutput:
    """The copy head's output for ``T`` decoder positions.

    Attributes:
        weights: ``(B, T, S)`` the copy attention ``a^t`` (zero on source padding).
        gate: ``(B, T)`` the logit of ``p_gen`` (``p_gen = sigmoid(gate)``).
        coverage_loss: ``(B, T)`` ``sum_i min(a_i^t, c_i^t)``; ``None`` without coverage.
    """

    weights: Tensor
    gate: Tensor
    coverage_loss: Tensor | None = None

    @property
    def p_gen(self) -> Tensor:
        """``(B, T)`` the generation probability."""
        return torch.sigmoid(self.gate)


class CopyHead(nn.Module):
    """The pointer-generator's copy attention and ``p_gen`` (eq. 1, 2, 8, 11).

    Args:
        query_dim: width of the decoder output ``s_t``.
        memory_dim: width of the encoder states ``h_i``.
        input_dim: width of the decoder input ``x_t``.
        attention_dim: hidden width ``A`` of the additive score.
        coverage: feed the coverage vector to the score (``w_c``, zero-initialised) and report
            the coverage loss.
        attention: the head's own attention (eq. 1); ``False``: the gate alone, for a decoder
            whose attention copies (:meth:`shared`; its coverage is the decoder's).
    """

    def __init__(
        self, query_dim: int, memory_dim: int, input_dim: int, *, attention_dim: int,
        coverage: bool = False, attention: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        if coverage and not attention:
            raise ValueError(
                "a copy head without its own attention has no coverage: the decoder's "
                "attention carries it; pass coverage=False to the head"
            )
        self.score = Additive(query_dim, memory_dim, attention_dim) if attention else None
        self.coverage_weight = nn.Parameter(torch.zeros(attention_dim)) if coverage else None
        self.gate = nn.Linear(memory_dim + query_dim + input_dim, 1)  # [w_h*; w_s; w_x], b_ptr

    @property
    def coverage(self) -> bool:
        return self.coverage_weight is not None

    def prepare(self, memory: Tensor, keep: Tensor, ext: Tensor, vocab_size: int) -> CopySource:
        """The batch's :class:`CopySource`: ``memory (B, S, Dm)``, ``keep (B, 1, S)`` or
        ``(B, S)`` boolean, ``ext (B, S)`` extended ids (``< V`` for words of the vocabulary)."""
        batch, length = memory.shape[:2]
        keep = keep.reshape(batch, 1, length)
        if ext.shape != (batch, length) or ext.dtype != torch.long:
            raise ValueError(
                f"the extended source ids must be (B, S) = {(batch, length)} long, got shape "
                f"{tuple(ext.shape)} and dtype {ext.dtype}"
            )
        if bool((ext < 0).any()):
            raise ValueError("extended source ids must be >= 0")
        extended_size = max(vocab_size, int(ext.max()) + 1 if ext.numel() else 0)
        coverage = memory.new_zeros(batch, length) if self.coverage else None
        keys = None if self.score is None else self.score.prepare(memory)  # (B, S, A)
        return CopySource(memory, keys, keep, ext, extended_size, coverage)

    def forward(
        self, features: Tensor, inputs: Tensor, source: CopySource
    ) -> tuple[CopyOutput, CopySource]:
        """Copy attention and ``p_gen`` for ``features (B, T, Dq)`` (``s_t``) and ``inputs
        (B, T, E)`` (``x_t``); returns them and ``source`` with its coverage advanced ``T``
        steps (the state a decoder carries to its next step)."""
        if source.keys is None:
            raise ValueError("this copy head has no attention of its own: call shared()")
        if self.coverage_weight is None:
            att = self._attend(features, source.keys, source)
            weights, context, losses = att.weights, att.context, None  # (B, T, S), (B, T, Dm)
        else:
            coverage = source.coverage
            assert coverage is not None  # prepare() made it
            steps, contexts, losses_t = [], [], []
            for t in range(features.size(1)):
                keys = source.keys + coverage[..., None] * self.coverage_weight  # (B, S, A)
                att = self._attend(features[:, t : t + 1], keys, source)
                w = att.weights[:, 0]  # (B, S)
                losses_t.append(torch.minimum(w, coverage).sum(dim=-1))  # (B,)
                coverage = coverage + w
                steps.append(w)
                contexts.append(att.context[:, 0])
            weights, context = torch.stack(steps, 1), torch.stack(contexts, 1)
            losses = torch.stack(losses_t, 1)  # (B, T)
            source = replace(source, coverage=coverage)
        gate = self.gate(torch.cat([context, features, inputs], dim=-1)).squeeze(-1)  # (B, T)
        return CopyOutput(weights, gate, losses), source

    def shared(
        self, weights: Tensor, context: Tensor, features: Tensor, inputs: Tensor,
        coverage_loss: Tensor | None = None,
    ) -> CopyOutput:  # fmt: skip
        """``p_gen`` for a decoder's own attention ``weights (B, T, S)`` (``a^t``, which copies)
        and its ``context (B, T, Dm)`` (``h*_t``), with ``features (B, T, Dq)`` and ``inputs
        (B, T, E)`` as in :meth:`forward`; ``coverage_loss (B, T)`` is passed through."""
        gate = self.gate(torch.cat([context, features, inputs], dim=-1)).squeeze(-1)  # (B, T)
        return CopyOutput(weights, gate, coverage_loss)

    def _attend(self, query: Tensor, keys: Tensor, source: CopySource):
        assert self.score is not None  # forward() refused a head without attention
        return attend(
            query,
            source.memory,
            source.memory,
            score=self.score,
            keep=source.keep,
            training=self.training,
            need_weights=True,
            prepared_key=keys,
        )


def coverage_losses(weights: Tensor) -> Tensor:
    """See et al.'s coverage loss (eq. 12) at every step of ``weights (B, T, S)``, the
    attention ``a^t`` of ``T`` consecutive steps from the first: ``(B, T)``
    ``sum_i min(a_i^t, c_i^t)`` with ``c^t = sum_{t' < t} a^{t'}`` (zero at the first step)."""
    coverage = F.pad(weights, (0, 0, 1, 0))[:, :-1].cumsum(dim=1)  # (B, T, S): c^t, t' < t
    return torch.minimum(weights, coverage).sum(dim=-1)


def _mixed(vocab_term: Tensor, mass: Tensor, gate: Tensor) -> Tensor:
    """``log(p_gen exp(vocab_term) + (1 - p_gen) mass)`` in float32 or wider; a zero ``mass``
    counts as the dtype's lowest value, never ``log(0)``."""
    lowest = torch.finfo(mass.dtype).min
    copy_term = torch.where(mass > 0, mass.clamp_min(torch.finfo(mass.dtype).tiny).log(), lowest)
    return torch.logaddexp(
        vocab_term + F.logsigmoid(gate), copy_term + F.logsigmoid(-gate)
    )  # log p_gen + log P_vocab  (+)  log(1 - p_gen) + log(copy mass)


def _float(*tensors: Tensor) -> list[Tensor]:
    dtype = torch.promote_types(tensors[0].dtype, torch.float32)
    return [t.to(dtype) for t in tensors]


def gold_log_probs(
    vocab_log_probs: Tensor, out: CopyOutput, ext: Tensor, targets: Tensor
) -> Tensor:
    """``log P(y_t)`` of the mixture (eq. 9) at the targets only, the training loss's term.

    Args:
        vocab_log_probs: ``(B, T, V)`` ``log P_vocab``.
        out: the head's :class:`CopyOutput` for the same positions.
        ext: ``(B, S)`` extended source ids.
        targets: ``(B, T)`` long target ids in the extended vocabulary.

    Returns:
        ``(B, T)`` in float32 (or wider), finite: a target of probability zero (an extended id
        the row's source does not hold, with ``p_gen`` exactly 1) gets the dtype's lowest value.
    """
    vocab = vocab_log_probs.size(-1)
    log_probs, weights, gate = _float(vocab_log_probs, out.weights, out.gate)
    lowest = torch.finfo(log_probs.dtype).min
    in_vocab = targets < vocab
    generated = log_probs.gather(-1, targets.clamp_max(vocab - 1)[..., None]).squeeze(-1)
    generated = torch.where(in_vocab, generated, lowest)  # (B, T)
    mass = (weights * (ext[:, None, :] == targets[:, :, None])).sum(dim=-1)  # (B, T)
    return _mixed(generated, mass, gate)


def extended_log_probs(
    vocab_log_probs: Tensor, out: CopyOutput, ext: Tensor, extended_size: int
) -> Tensor:
    """The whole mixture ``log P(w)`` (eq. 9) over the extended vocabulary, for decoding.

    Args:
        vocab_log_probs: ``(B, T, V)`` ``log P_vocab``.
        out: the head's :class:`CopyOutput`.
        ext: ``(B, S)`` extended source ids, all ``< extended_size``.
        extended_size: ``Vx >= V``.

    Returns:
        ``(B, T, Vx)`` in float32 (or wider); ``-inf`` exactly where the probability is zero
        (an id beyond ``V`` that no source token of the row holds with nonzero attention).
    """
    batch, steps, vocab = vocab_log_probs.shape
    if extended_size < vocab:
        raise ValueError(f"extended_size {extended_size} is smaller than the vocabulary {vocab}")
    log_probs, weights, gate = _float(vocab_log_probs, out.weights, out.gate)
    lowest = torch.finfo(log_probs.dtype).min
    generated = F.pad(log_probs, (0, extended_size - vocab), value=lowest)  # (B, T, Vx)
    index = ext[:, None, :].expand(batch, steps, ext.size(-1))  # (B, T, S)
    mass = weights.new_zeros(batch, steps, extended_size).scatter_add_(-1, index, weights)
    mixed = _mixed(generated, mass, gate[..., None])  # (B, T, Vx)
    possible = mass > 0
    possible[..., :vocab] = True
    return mixed.masked_fill(~possible, -math.inf)


@dataclass(frozen=True)
class CopyEncoding:
    """A copying model's encoding for the step protocol: the decoder's own encoding and the
    extended source ids (``keep`` is the inner encoding's, the positions attention covers)."""

    inner: Any
    ext: Tensor

    @property
    def keep(self) -> Tensor:
        return self.inner.keep


@dataclass(frozen=True)
class CopyState:
    """A copying model's decoder state: the decoder's own and the copy head's source."""

    decoder: Any
    source: CopySource


def check_extended_ids(src: Tensor, ext: Tensor, vocab_size: int, unk_id: int) -> None:
    """Refuse extended ids that disagree with ``src (B, S)``: equal where ``src`` is a word of the
    vocabulary, ``>= V`` where it is ``unk_id`` (or ``unk_id`` itself, a word never copied)."""
    if ext.shape != src.shape or ext.dtype != torch.long:
        raise ValueError(
            f"src_ext must be long with the shape of src {tuple(src.shape)}, got shape "
            f"{tuple(ext.shape)} and dtype {ext.dtype}"
        )
    known = src != unk_id
    bad = (known & (ext != src)) | (~known & (ext < vocab_size) & (ext != unk_id))
    if bool(bad.any()):
        raise ValueError(
            "src_ext must equal src at words of the vocabulary and hold an id >= the vocabulary "
            f"size ({vocab_size}) where src has the unknown word (id {unk_id})"
        )


def copy_encoding(
    encoded: Any,
    src: Tensor,
    src_ext: Tensor | None,
    *,
    copying: bool,
    vocab_size: int,
    unk_id: int,
) -> Any:
    """What a model's ``encode`` returns: ``encoded`` itself for a model that does not copy (it
    takes no ``src_ext``), else a :class:`CopyEncoding` with the checked extended ids
    (``src_ext``, by default ``src``: no out-of-vocabulary slots)."""  # fmt: skip
    if not copying:
        if src_ext is not None:
            raise ValueError("src_ext is for a copying model; this one has copy=False")
        return encoded
    ext = src if src_ext is None else src_ext
    check_extended_ids(src, ext, vocab_size, unk_id)
    return CopyEncoding(encoded, ext)


def fed_ids(tokens: Tensor, vocab_size: int, unk_id: int) -> Tensor:
    """``tokens`` with extended ids (``>= V``, copied words) fed back to a decoder as
    ``unk_id``: it can copy a word it has no embedding for."""
    return tokens.masked_fill(tokens >= vocab_size, unk_id)

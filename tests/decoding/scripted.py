"""A scripted StepModel for the decoding tests, and an exhaustive reference search.

The model's next-token distribution is a fixed function of ``(table id, prefix)``: the table id
is the first source token of the sentence (so different sentences can follow different tables)
and the prefix is the tuple of tokens generated so far (without BOS). Best hypotheses and their
scores can then be worked out by hand, or by enumerating every output (:func:`exhaustive`).

The model also checks how it is driven: the first token fed to a row must be BOS, and a row is
never fed EOS (that would be extending a finished hypothesis, OpenNMT-py#137).

Its attention row identifies the prefix it was computed from: ``[code(prefix), len(prefix),
table id, 0.5, ...]`` over the true source length and ``PADDING_ATTENTION`` on padding columns,
so a test can check that the row attached to every output token comes from that token's own path.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from qkv.models.outputs import StepOutput

PAD, BOS, EOS = 0, 1, 2
A, B, C = 3, 4, 5  # content tokens of the hand-written tables
VOCAB = 6
PADDING_ATTENTION = -7.0

NextProbs = Callable[[int, tuple[int, ...]], Sequence[float]]


def dist(spec: Mapping[int, float], vocab: int = VOCAB) -> list[float]:
    """Probabilities ``spec[token]`` for the listed tokens; the rest of the mass goes to the other
    tokens in geometrically decreasing shares (halving), so no two of them tie."""
    listed = sum(spec.values())
    others = [token for token in range(vocab) if token not in spec]
    assert listed <= 1.0 + 1e-12 and (others or abs(listed - 1.0) < 1e-12), spec
    weights = [0.5**i for i in range(len(others))]
    probs = [0.0] * vocab
    for token, p in spec.items():
        probs[token] = p
    for token, w in zip(others, weights, strict=True):
        probs[token] = (1.0 - listed) * w / sum(weights)
    return probs


def table(
    rows: Mapping[tuple[int, ...], Mapping[int, float]],
    default: Mapping[int, float] | None = None,
    vocab: int = VOCAB,
) -> NextProbs:
    """A next-token function from ``{prefix: {token: p}}``; unlisted prefixes get ``default``
    (EOS 0.9 unless given), whatever the table id."""
    fallback = dist(default if default is not None else {EOS: 0.9}, vocab)
    probs = {prefix: dist(spec, vocab) for prefix, spec in rows.items()}
    return lambda table_id, prefix: probs.get(prefix, fallback)


def tables(by_id: Mapping[int, NextProbs]) -> NextProbs:
    """One next-token function per table id (the sentence's first source token)."""
    return lambda table_id, prefix: by_id[table_id](table_id, prefix)


def random_table(seed: int, vocab: int = VOCAB, eos_growth: float = 0.5) -> NextProbs:
    """Random, tie-free distributions, a fixed function of ``(seed, table id, prefix)``; EOS grows
    more likely with the prefix length so that hypotheses end at different lengths."""

    def next_probs(table_id: int, prefix: tuple[int, ...]) -> list[float]:
        rng = random.Random(f"{seed}/{table_id}/{prefix}")
        weights = [math.exp(2.0 * rng.gauss(0.0, 1.0)) for _ in range(vocab)]
        weights[EOS] *= 1.0 + eos_growth * len(prefix)
        total = sum(weights)
        return [w / total for w in weights]

    return next_probs


def code(prefix: Sequence[int], vocab: int = VOCAB) -> float:
    """A number that identifies a prefix (exact in float32 for the short prefixes used here)."""
    return float(sum((token + 1) * (vocab + 1) ** i for i, token in enumerate(prefix)))


def attention_row(prefix: Sequence[int], table_id: int, width: int, length: int) -> list[float]:
    """The attention row the model returns after ``prefix`` (``length`` >= 3 real columns)."""
    row = [code(prefix), float(len(prefix)), float(table_id)] + [0.5] * (width - 3)
    return [value if j < length else PADDING_ATTENTION for j, value in enumerate(row)]


@dataclass(frozen=True)
class ScriptedEncoding:
    """The scripted model's encoding: its inputs and ``keep (B, S)``, the real source positions
    (what the searches read to drop padding columns from a hypothesis's attention)."""

    src: Tensor
    src_lengths: Tensor
    keep: Tensor


@dataclass
class ScriptedModel:
    """A :class:`~qkv.decoding.protocol.StepModel` that follows ``next_probs``.

    Attributes:
        next_probs: ``(table id, prefix) -> probabilities (V,)``.
        vocab: ``V``.
        with_attention: return attention rows (else ``None``).
        dtype: dtype of the returned log-probabilities.
        rows_stepped: total number of rows fed to ``step`` (work done).
    """

    next_probs: NextProbs
    vocab: int = VOCAB
    with_attention: bool = True
    dtype: torch.dtype = torch.float64
    rows_stepped: int = 0

    def encode(self, src: Tensor, src_lengths: Tensor) -> ScriptedEncoding:
        # A model checks its own inputs (the searches pass them on untouched), as the
        # Transformer and the RNN do.
        if src.dim() != 2:
            raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
        if src_lengths.shape != (src.size(0),):
            raise ValueError(
                f"src_lengths must be (B,) = ({src.size(0)},) for src of shape "
                f"{tuple(src.shape)}, got shape {tuple(src_lengths.shape)}"
            )
        assert src.size(1) >= 3, "the scripted model needs S >= 3"
        keep = torch.arange(src.size(1))[None, :] < src_lengths[:, None]  # (B, S)
        return ScriptedEncoding(src, src_lengths, keep)

    def init_state(self, encoded: ScriptedEncoding) -> dict[str, Tensor]:
        src = encoded.src
        return {
            "src": src,  # (B, S) stands for the encoder memory: select_state must reorder it
            "src_lengths": encoded.src_lengths,
            "fed": torch.empty((src.size(0), 0), dtype=torch.long),  # (B, t) tokens fed so far
        }

    def select_state(self, state: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
        return {name: value.index_select(0, index) for name, value in state.items()}

    def step(self, tokens: Tensor, state: dict[str, Tensor]) -> StepOutput:
        src, lengths = state["src"], state["src_lengths"]
        assert tokens.shape == (src.size(0),), (tokens.shape, src.shape)
        fed = torch.cat([state["fed"], tokens[:, None]], dim=1)  # (B, t + 1)
        self.rows_stepped += fed.size(0)
        probs, attention = [], []
        for row in range(fed.size(0)):
            history = fed[row].tolist()
            assert history[0] == BOS, f"first token fed was {history[0]}, not BOS"
            assert EOS not in history, f"a finished hypothesis was extended: {history}"
            prefix = tuple(history[1:])
            table_id = int(src[row, 0])
            p = self.next_probs(table_id, prefix)
            assert len(p) == self.vocab and abs(sum(p) - 1.0) < 1e-9
            probs.append(p)
            attention.append(attention_row(prefix, table_id, src.size(1), int(lengths[row])))
        log_probs = torch.tensor(probs, dtype=torch.float64).log().to(self.dtype)  # (B, V)
        return StepOutput(
            log_probs=log_probs,
            state={"src": src, "src_lengths": lengths, "fed": fed},
            attention=torch.tensor(attention) if self.with_attention else None,  # (B, S)
        )


def source(table_ids: Sequence[int], lengths: Sequence[int]) -> tuple[Tensor, Tensor]:
    """A right-padded source batch whose sentence ``b`` selects table ``table_ids[b]``."""
    width = max(lengths)
    src = torch.full((len(lengths), width), PAD, dtype=torch.long)
    for b, (table_id, length) in enumerate(zip(table_ids, lengths, strict=True)):
        src[b, :length] = torch.tensor([table_id] + [A] * (length - 2) + [EOS])
    return src, torch.tensor(list(lengths))


def lp(length: int, alpha: float) -> float:
    """GNMT length penalty, written out here: ``(5 + |Y|)^alpha / 6^alpha``."""
    return (5 + length) ** alpha / 6**alpha


def log_prob_of(next_probs: NextProbs, table_id: int, tokens: Sequence[int]) -> float:
    """``log P(tokens + [EOS])`` under the table, in float64."""
    total = 0.0
    for i, token in enumerate([*tokens, EOS]):
        total += math.log(next_probs(table_id, tuple(tokens[:i]))[token])
    return total


def repeats(prefix: Sequence[int], token: int, n: int) -> bool:
    """Whether ``prefix + [token]`` holds some ``n``-gram twice, given that ``prefix`` does not
    (``n = 0``: never): its last ``n``-gram occurs earlier, compared as plain tuples."""
    tokens = [*prefix, token]
    if n < 1 or len(tokens) < n:
        return False
    last = tuple(tokens[-n:])
    return any(tuple(tokens[i : i + n]) == last for i in range(len(tokens) - n))


def exhaustive(
    next_probs: NextProbs,
    table_id: int,
    *,
    max_len: int,
    min_len: int = 0,
    alpha: float = 0.0,
    vocab: int = VOCAB,
    no_repeat: int = 0,
) -> list[tuple[list[int], float, float]]:
    """Every output of ``min_len .. max_len`` tokens as ``(tokens, score, log_prob)``, best first:
    the answer an infinitely wide beam gives (an independent reference: no tensors, no beam)."""
    outputs = []

    def visit(prefix: list[int], log_prob: float) -> None:
        probs = next_probs(table_id, tuple(prefix))
        if len(prefix) >= min_len and probs[EOS] > 0:
            total = log_prob + math.log(probs[EOS])
            outputs.append((prefix, total / lp(len(prefix) + 1, alpha), total))
        if len(prefix) < max_len:
            for token in range(vocab):
                if token != EOS and probs[token] > 0 and not repeats(prefix, token, no_repeat):
                    visit([*prefix, token], log_prob + math.log(probs[token]))

    visit([], 0.0)
    return sorted(outputs, key=lambda output: -output[1])


def reference_beam(
    next_probs: NextProbs,
    table_id: int,
    *,
    beam_size: int,
    max_len: int,
    min_len: int = 0,
    alpha: float = 0.0,
    n_best: int = 1,
    vocab: int = VOCAB,
    no_repeat: int = 0,
) -> list[tuple[list[int], float, float]]:
    """The documented beam search for one sentence in plain Python, run to the end (no early
    stop, no tensors): ``(tokens, score, log_prob)`` best first."""
    live: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float, float]] = []
    for step in range(max_len + 1):
        candidates = []
        for prefix, log_prob in live:
            probs = next_probs(table_id, tuple(prefix))
            for token in range(vocab):
                allowed = (token != EOS or step >= min_len) and (token == EOS or step < max_len)
                allowed = allowed and (token == EOS or not repeats(prefix, token, no_repeat))
                if allowed and probs[token] > 0:
                    candidates.append((prefix, token, log_prob + math.log(probs[token])))
        candidates.sort(key=lambda candidate: -candidate[2])  # stable: ties keep their order
        for prefix, token, log_prob in candidates[:beam_size]:
            if token == EOS:
                finished.append((prefix, log_prob / lp(len(prefix) + 1, alpha), log_prob))
        live = [([*prefix, token], value) for prefix, token, value in candidates if token != EOS]
        live = live[:beam_size]
        if not live:
            break
    finished.sort(key=lambda output: -output[1])
    return finished[:n_best]

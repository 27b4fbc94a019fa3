"""Beam search with the GNMT length penalty, Wu et al. 2016, eq. (14).

    s(Y, X) = log P(Y | X) / lp(Y),    lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha

``|Y|`` counts the generated tokens of one hypothesis, its EOS included (never a padded length);
``alpha = 0`` scores by the plain sum of log-probabilities.

The search, for each sentence of the batch (``K = beam_size``, all sentences at once):

1. Start from one live hypothesis, ``[BOS]``, the model state repeated ``K`` times.
2. At each step expand every live hypothesis by every token and rank the ``K * V`` candidates by
   log-probability (all have the same length, so the penalty does not change the ranking).
3. EOS candidates among the best ``K`` finish: they enter the sentence's pool of the ``n_best``
   best finished hypotheses (by penalised score). A finished hypothesis is never extended.
4. The best ``K`` non-EOS candidates are the next live hypotheses (``model.select_state``
   reorders the state to them), so the beam stays full after some hypotheses finish.
5. The sentence stops when its pool holds ``n_best`` hypotheses and no live one can still beat
   the worst of them, not when the best hypothesis finishes (joeynmt#148). Since log-probabilities
   are <= 0 and only add up, a live hypothesis with log-probability ``L`` ends with a score of at
   most ``L / max(lp)`` over the lengths still reachable (with ``alpha >= 0``: ``L / lp(max_len +
   1)``). Stopping on that bound returns exactly what running to ``max_len`` would.

With ``patience = p`` a sentence also stops once ``ceil(p * K)`` of its hypotheses have finished
(Kasai et al. 2022, "Beam Decoding with Controlled Patience"; ``p = 1`` is the rule of
CTranslate2, fairseq and Hugging Face's ``early_stopping=True``): fewer steps, and with
``alpha > 0`` possibly another result than the search above, which may still find a longer
hypothesis that scores better. ``None`` (the default) keeps the exact search.

Length constraints (``min_len``, ``max_len`` with a forced EOS) are those of
``qkv.decoding._common``: at step ``max_len`` only EOS is allowed, so every live hypothesis is
finished there with the model's own EOS log-probability and competes like any other.

The model is anything that implements the step protocol (:mod:`qkv.decoding.protocol`): the
search passes ``*inputs`` to its ``encode``, so translations and captions share it.

Every sentence's rows are computed independently and a finished sentence leaves the batch, so a
batch of ``N`` sentences gives the results of ``N`` batches of one. With ``beam_size = 1``,
``n_best = 1`` and ``alpha = 0`` the search is greedy search.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from qkv.decoding._common import (
    append_attention,
    check_forbidden,
    check_limits,
    check_no_repeat,
    checked_step,
    positions,
    sentence_limits,
    trimmed,
)
from qkv.decoding.hypothesis import Hypothesis
from qkv.decoding.protocol import StepModel
from qkv.decoding.sizes import check_beam_size, check_int


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """``lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha`` for ``|Y| = length`` generated tokens."""
    return (5.0 + length) ** alpha / 6.0**alpha


def slots_in_place(parents: Tensor) -> Tensor:
    """An order of each sentence's ``K`` new hypotheses in which as many as can stay where their
    parent was: ``(n, K)`` indices into ``parents (n, K)`` (each new hypothesis's parent slot,
    ``0 .. K - 1``).

    The first child of each parent (in rank order) takes its parent's slot; the other children
    take the slots of parents that had none, in order. So a parent's state never moves, and only
    the rows of the other children change: reordering the state copies those rows alone
    (:meth:`~qkv.models.transformer.decode.LeanTranslationDecoder.select_state`). Which slot a
    hypothesis holds changes nothing in the search: a sentence's slots are ranked afresh at
    every step.
    """
    k = parents.size(1)
    slot = torch.arange(k, device=parents.device)
    earlier = slot[None, :] < slot[:, None]  # (K, K): True where j comes before i
    same = parents[:, :, None] == parents[:, None, :]  # (n, K, K)
    first = ~(same & earlier).any(dim=2)  # (n, K): the first child of its parent
    taken = torch.zeros_like(first).scatter_(1, parents, True)  # (n, K): slots with a child
    # The i-th child that is not first takes the i-th slot without a child (as many of each).
    free = torch.sort(taken.to(torch.uint8), dim=1, stable=True).indices  # empty slots first
    later = torch.sort(first.to(torch.uint8), dim=1, stable=True).indices  # later children first
    value = torch.where(first.gather(1, later), parents.gather(1, later), free)
    target = torch.empty_like(parents).scatter_(1, later, value)  # (n, K): each child's slot
    return torch.argsort(target, dim=1)  # (n, K): the hypothesis that each slot holds


class _Pool:
    """The ``size`` best finished hypotheses of one sentence, best first (ties: found first)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hypotheses: list[Hypothesis] = []
        self._keys: list[float] = []  # -score, ascending

    @property
    def full(self) -> bool:
        return len(self.hypotheses) >= self.size

    @property
    def worst(self) -> float:
        return self.hypotheses[-1].score

    def accepts(self, score: float) -> bool:
        return not self.full or score > self.worst

    def add(self, hypothesis: Hypothesis) -> None:
        at = bisect.bisect_right(self._keys, -hypothesis.score)
        self._keys.insert(at, -hypothesis.score)
        self.hypotheses.insert(at, hypothesis)
        del self._keys[self.size :], self.hypotheses[self.size :]


# size: one step loop that ranks, finishes and prunes over the same tensors, read as a whole
@torch.no_grad()
def beam_search(
    model: StepModel,
    *inputs: Any,
    beam_size: int,
    max_len: int | Tensor | list[int],
    min_len: int = 0,
    length_penalty: float = 0.6,
    n_best: int = 1,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = 0,
    forbidden_ids: Sequence[int] = (),
    no_repeat_ngram: int = 0,
    patience: float | None = None,
) -> list[list[Hypothesis]]:
    """Decode every sentence of a batch with beam search.

    The model is used as it is: call ``model.eval()`` first to decode without dropout. Its
    ``log_probs`` must be normalised (every entry <= 0): the stopping rule relies on it.

    Args:
        model: any :class:`~qkv.decoding.protocol.StepModel`.
        inputs: what ``model.encode`` takes, for one batch: ``src (B, S)`` right-padded source
            ids and their true lengths ``(B,)`` for translation; ``images`` and their region
            ``keep`` for a captioner.
        beam_size: ``K``, live hypotheses kept per sentence.
        max_len: most tokens per output, EOS not counted; a hypothesis still running after
            ``max_len`` tokens gets a forced EOS (scored with the model's EOS log-probability).
            One number, or one per sentence ``(B,)``.
        min_len: fewest tokens per output, EOS not counted (EOS is forbidden before).
        length_penalty: ``alpha`` of the GNMT penalty; ``0`` ranks by the sum of log-probs.
        n_best: hypotheses returned per sentence, ``1 <= n_best <= beam_size``.
        bos_id: the token fed at the first step.
        eos_id: the token that ends a hypothesis.
        pad_id: the token fed to empty beam slots (their outputs are never used).
        forbidden_ids: tokens never generated (their log-probability is ``-inf``).
        no_repeat_ngram: ``n > 0``: no output holds the same ``n``-gram twice (a token that
            would repeat one gets log-probability ``-inf``); ``0`` blocks nothing.
        patience: ``p > 0``: a sentence also stops once ``ceil(p * beam_size)`` of its
            hypotheses have finished (at least ``n_best``); ``None``: the exact search.

    Returns:
        For each sentence, in batch order, its ``n_best`` distinct hypotheses, best score first.
        Fewer only when the beam runs out of hypotheses of nonzero probability (tokens with
        log-probability ``-inf`` are never chosen). Ties between equal candidates are broken
        arbitrarily.
    """
    check_limits(max_len, min_len)
    forbidden = check_forbidden(forbidden_ids, eos_id)
    no_repeat_ngram = check_no_repeat(no_repeat_ngram)
    beam_size = check_beam_size(beam_size)
    if not 1 <= check_int(n_best, "n_best") <= beam_size:
        raise ValueError(
            f"n_best must be between 1 and beam_size, got n_best={n_best}, beam_size={beam_size}"
        )
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be finite, got {length_penalty}")
    enough = math.inf  # finished hypotheses after which a sentence stops (patience)
    if patience is not None:
        if isinstance(patience, bool) or not isinstance(patience, int | float):
            raise ValueError(f"patience must be a number > 0 or None, got {patience!r}")
        if not (math.isfinite(patience) and patience > 0):
            raise ValueError(f"patience must be a number > 0 or None, got {patience}")
        enough = math.ceil(patience * beam_size)
        if enough < n_best:
            raise ValueError(
                f"patience={patience} stops after {enough} finished hypotheses, fewer than "
                f"n_best={n_best}; pass patience >= {n_best / beam_size:g}"
            )
    encoded = model.encode(*inputs)
    real = positions(encoded)  # (B, S): the columns each hypothesis's attention keeps
    batch, k, device = real.size(0), beam_size, real.device
    if batch == 0:
        return []
    limits = sentence_limits(max_len, batch, device)  # (B,)
    limit_list = limits.tolist()
    pools = [_Pool(n_best) for _ in range(batch)]
    finished = [0] * batch  # hypotheses each sentence has finished (patience)

    def penalty(n: int) -> float:
        return gnmt_length_penalty(n, length_penalty)

    state = model.init_state(encoded)
    # Rows b*K .. b*K + K - 1 hold the beam of the b-th active sentence.
    state = model.select_state(state, torch.arange(batch, device=device).repeat_interleave(k))
    active = list(range(batch))  # original index of each active sentence (n of them)
    live = torch.full((batch, k), -math.inf, dtype=torch.float64, device=device)  # (n, K)
    live[:, 0] = 0.0  # one real hypothesis per sentence; the other slots are empty (-inf)
    tokens = torch.full((batch * k,), bos_id, dtype=torch.long, device=device)  # (n*K,)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)  # (n*K, t)
    attn_history: Tensor | None = None  # (n*K, t, S)

    for step in range(max(limit_list) + 1):
        n = len(active)
        row_limits = limits[torch.tensor(active, device=device)].repeat_interleave(k)  # (n*K,)
        out, log_probs = checked_step(
            model,
            tokens,
            state,
            step=step,
            min_len=min_len,
            max_len=row_limits,
            eos_id=eos_id,
            forbidden=forbidden,
            history=history,
            no_repeat_ngram=no_repeat_ngram,
        )  # log_probs (n*K, V)
        vocab = log_probs.size(1)
        attn_history = append_attention(attn_history, out.attention, step)  # (n*K, t+1, S)
        # The best 2K candidates of a sentence are among the best 2K of each of its rows (a
        # row adds one number, its live score, to all its tokens): rank each row's tokens
        # first, in the model's dtype, then only those candidates in float64.
        per_row = min(2 * k, vocab)
        row_scores, row_tokens = log_probs.topk(per_row, dim=1)  # (n*K, c)
        candidates = (live.view(n * k, 1) + row_scores.to(torch.float64)).view(n, k * per_row)
        # 2K candidates always hold K non-EOS ones: each live hypothesis has one EOS candidate.
        top_scores, top_index = candidates.topk(min(2 * k, k * per_row), dim=1)  # (n, C), sorted
        top_rows = top_index // per_row + torch.arange(n, device=device)[:, None] * k  # (n, C)
        top_tokens = row_tokens.view(n, k * per_row).gather(1, top_index)  # (n, C)
        is_eos = top_tokens == eos_id  # (n, C)

        # Finished: EOS candidates among the best K, of nonzero probability.
        rank = torch.arange(top_scores.size(1), device=device)
        ends = is_eos & (rank < k) & torch.isfinite(top_scores)  # (n, C)
        n_generated = step + 1  # the EOS included
        # One transfer for all of them (no per-element device syncs).
        sentences = ends.nonzero()[:, 0].tolist()
        ended = zip(sentences, top_scores[ends].tolist(), top_rows[ends].tolist(), strict=True)
        for i, log_prob, row in ended:
            sentence = active[i]
            finished[sentence] += 1
            score = log_prob / penalty(n_generated)
            if pools[sentence].accepts(score):
                attention = None if attn_history is None else attn_history[row]
                pools[sentence].add(
                    Hypothesis(
                        tokens=history[row].tolist(),
                        score=score,
                        log_prob=log_prob,
                        attention=trimmed(attention, real[sentence]),
                    )
                )

        # Live: the best K non-EOS candidates (a stable sort puts EOS last), each in the slot
        # its parent held where it can be (:func:`slots_in_place`).
        pick = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :k]  # (n, K)
        pick = pick.gather(1, slots_in_place(top_index.gather(1, pick) // per_row))
        live = top_scores.gather(1, pick).masked_fill(is_eos.gather(1, pick), -math.inf)
        rows = top_rows.gather(1, pick)  # (n, K) the parent row of each new hypothesis
        tokens = top_tokens.gather(1, pick).masked_fill(~torch.isfinite(live), pad_id)

        # A sentence is done when nothing live can still enter (or improve) its pool.
        best_live = live.max(dim=1).values.tolist()  # (n,)
        done = []
        for s, best in zip(active, best_live, strict=True):
            bound = best / max(penalty(n_generated + 1), penalty(limit_list[s] + 1))
            done.append(
                not math.isfinite(bound)
                or (pools[s].full and bound <= pools[s].worst)
                or finished[s] >= enough
            )
        if all(done):
            break
        keep = torch.tensor([i for i, d in enumerate(done) if not d], device=device)  # (n',)
        active = [s for s, d in zip(active, done, strict=True) if not d]
        live, rows, tokens = live[keep], rows[keep].flatten(), tokens[keep].flatten()
        history = torch.cat([history[rows], tokens[:, None]], dim=1)  # (n'*K, t+1)
        if attn_history is not None:
            attn_history = attn_history[rows]  # (n'*K, t+1, S)
        state = model.select_state(out.state, rows)

    return [pool.hypotheses for pool in pools]

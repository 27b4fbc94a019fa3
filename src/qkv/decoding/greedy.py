"""Greedy decoding: at every step take the most probable token, ``y_t = argmax p(y | y_<t, X)``.

The model is anything that implements the step protocol (:mod:`qkv.decoding.protocol`): the
search passes ``*inputs`` to its ``encode``, so it decodes translations from ``(src,
src_lengths)`` and captions from ``(images, keep)`` alike.

Batched: every sentence of the batch is decoded at once; a sentence that has produced its EOS
leaves the batch (``model.select_state`` drops its rows), so its later steps are never computed
and cannot change it. Length constraints (``min_len``, ``max_len`` with a forced EOS) are those of
``qkv.decoding._common``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

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


@torch.no_grad()
def greedy_search(
    model: StepModel,
    *inputs: Any,
    max_len: int | Tensor | list[int],
    min_len: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    forbidden_ids: Sequence[int] = (),
    no_repeat_ngram: int = 0,
) -> list[Hypothesis]:
    """Decode every sentence of a batch greedily.

    The model is used as it is: call ``model.eval()`` first to decode without dropout.

    Args:
        model: any :class:`~qkv.decoding.protocol.StepModel`.
        inputs: what ``model.encode`` takes, for one batch: ``src (B, S)`` right-padded source
            ids and their true lengths ``(B,)`` for translation; ``images`` and their region
            ``keep`` for a captioner.
        max_len: most tokens per output, EOS not counted; a sentence still running after
            ``max_len`` tokens gets a forced EOS (scored with the model's EOS log-probability).
            One number, or one per sentence ``(B,)``.
        min_len: fewest tokens per output, EOS not counted (EOS is forbidden before).
        bos_id: the token fed at the first step.
        eos_id: the token that ends a sentence.
        forbidden_ids: tokens never generated (their log-probability is ``-inf``).
        no_repeat_ngram: ``n > 0``: no output holds the same ``n``-gram twice (a token that
            would repeat one gets log-probability ``-inf``); ``0`` blocks nothing.

    Returns:
        One :class:`Hypothesis` per sentence, in batch order; ``score == log_prob``.
        Ties between equally probable tokens go to the lowest token id.
    """
    check_limits(max_len, min_len)
    forbidden = check_forbidden(forbidden_ids, eos_id)
    no_repeat_ngram = check_no_repeat(no_repeat_ngram)
    encoded = model.encode(*inputs)
    real = positions(encoded)  # (B, S): the columns each hypothesis's attention keeps
    batch, device = real.size(0), real.device
    if batch == 0:
        return []
    limits = sentence_limits(max_len, batch, device)  # (B,)
    state = model.init_state(encoded)

    # Rows still decoding; row i is sentence active[i].
    active = torch.arange(batch, device=device)  # (N,)
    tokens = torch.full((batch,), bos_id, dtype=torch.long, device=device)  # (N,)
    history = torch.empty((batch, 0), dtype=torch.long, device=device)  # (N, t)
    attn_history: Tensor | None = None  # (N, t, S)
    log_prob = torch.zeros(batch, dtype=torch.float64, device=device)  # (N,)
    results: list[Hypothesis | None] = [None] * batch

    for step in range(int(limits.max()) + 1):
        out, log_probs = checked_step(
            model,
            tokens,
            state,
            step=step,
            min_len=min_len,
            max_len=limits[active],
            eos_id=eos_id,
            forbidden=forbidden,
            history=history,
            no_repeat_ngram=no_repeat_ngram,
        )  # log_probs (N, V)
        tokens = log_probs.argmax(dim=-1)  # (N,) the first maximum: lowest id on ties
        log_prob = log_prob + log_probs.gather(1, tokens[:, None]).squeeze(1)
        history = torch.cat([history, tokens[:, None]], dim=1)  # (N, t + 1)
        attn_history = append_attention(attn_history, out.attention, step)

        finished = tokens == eos_id  # (N,)
        for i in finished.nonzero().flatten().tolist():
            sentence = int(active[i])
            value = float(log_prob[i])
            attention = None if attn_history is None else attn_history[i]
            results[sentence] = Hypothesis(
                tokens=history[i, :-1].tolist(),
                score=value,
                log_prob=value,
                attention=trimmed(attention, real[sentence]),
            )
        if bool(finished.all()):
            break
        state = out.state
        if bool(finished.any()):
            keep = (~finished).nonzero().flatten()  # (N',)
            state = model.select_state(state, keep)
            active, tokens, history, log_prob = (
                active[keep],
                tokens[keep],
                history[keep],
                log_prob[keep],
            )
            if attn_history is not None:
                attn_history = attn_history[keep]

    # Step max_len allows EOS only, so every row has finished by now.
    return cast(list[Hypothesis], results)

"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", section 3).

Rollout (:mod:`qkv.attention.rollout`) multiplies the layers' matrices, so it adds up every path
from an output to an input. Flow instead reads the stack as a flow network: the nodes are the
tokens of every layer (layer 0 = the input tokens, layer ``L`` = the last layer's outputs), and
output ``i`` of layer ``l`` has an edge to input ``j`` of layer ``l`` (= output ``j`` of layer
``l - 1``) with capacity ``A_l[i, j]``, the residual-adjusted weight of rollout's eq. 1,
``A_l = (1 - r) W_l + r I``. The flow of output ``i`` to input ``j`` is the value of the maximum
flow from node ``(L, i)`` to node ``(0, j)``; like the authors' code, each output's row is then
divided by its sum, so rows sum to 1 as rollout's do (``normalise=False`` keeps the raw values).

A path's flow is limited by its weakest edge, not multiplied along it, so flow spreads credit
more evenly over the inputs than rollout.

Cost: ``N^2`` maximum-flow problems per sequence, each on a graph of ``(L + 1) N`` nodes and
``L N^2`` edges (networkx's preflow-push, pure Python; networkx is installed with torch, which
requires it). Measured on one core of a busy 2-core Xeon, 12 layers take about 1 s at N = 8,
7 s at N = 16 and 47 s at N = 32 per sequence, growing as ``N^4``, so ``N`` above
:data:`MAX_FLOW_TOKENS` is refused unless the caller raises ``max_tokens``.

Only some outputs' rows (``rows``: a ViT's [CLS], whose row is what its map shows) take
``len(rows) x N`` problems, and the limit counts that work (:func:`flow_fits`). Measured the same
way for the [CLS] row of random softmax weights (4 heads): 0.2 s for the test fixture's ViT (one
layer, N = 17), 3.3 s for 6 layers at N = 65 (a 32 x 32 image in 4 x 4 patches, plus [CLS]),
6.5 s for 12 layers at N = 65 and 12.5 s for 6 layers at N = 101 (the largest one row may
take). SciPy's compiled ``maximum_flow`` (not measured) may be faster, but SciPy is no
dependency of qkv and these times are those of one request, so networkx serves alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from qkv.attention.rollout import residual_attention

__all__ = ["MAX_FLOW_TOKENS", "attention_flow", "flow_fits"]

MAX_FLOW_TOKENS = 32
# networkx's max-flow algorithms are exact on integers only ("floating point capacities may
# cause roundoff errors"), so capacities are scaled by 2^40 and rounded: float32 weights in
# [0, 1] then lose at most 2^-41 each, far below their own precision.
_SCALE = 2**40


def attention_flow(
    weights: Sequence[Tensor],
    *,
    residual: float = 0.5,
    head_fusion: str = "mean",
    normalise: bool = True,
    rows: Sequence[int] | None = None,
    max_tokens: int = MAX_FLOW_TOKENS,
) -> Tensor:
    """The attention flow from the last layer's outputs to the first layer's inputs.

    Args:
        weights: one ``(B, H, N, N)`` (or ``(B, N, N)``) attention per layer, first layer first,
            each row a distribution (softmax weights), as for
            :func:`~qkv.attention.rollout.attention_rollout`.
        residual: ``r``, the share of the identity (the residual path) in each layer.
        head_fusion: ``mean`` (the paper's), or ``max`` / ``min`` (rows renormalised).
        normalise: divide each output's row by its sum (the authors' code does), so rows sum to
            1 like rollout's; ``False`` returns the maximum-flow values themselves.
        rows: the outputs whose rows are computed, distinct indices in ``0 .. N - 1`` (a ViT's
            ``[0]``, its [CLS]: ``N`` maximum-flow problems instead of ``N^2``); ``None``: all.
        max_tokens: the largest ``N`` whose full matrix is computed. The work, counted as
            ``len(rows) x N`` problems of ``N^2`` edges per layer, may be at most what the full
            matrix of ``max_tokens`` tokens takes (``max_tokens^4``), so one row is allowed up
            to ``N = max_tokens^(4/3)`` (101 tokens for the default 32); raise it knowingly.

    Returns:
        ``(B, R, N)`` float32 with ``R = len(rows)`` (``(B, N, N)`` for ``rows=None``); row
        ``k`` is how much output ``rows[k]`` draws on each input token (for one layer, that
        row of the residual-adjusted attention ``A_1`` itself).
    """
    layers = residual_attention(weights, residual=residual, head_fusion=head_fusion)
    tokens = layers[0].size(-1)
    outputs = _check_rows(rows, tokens)
    if not flow_fits(tokens, len(outputs), max_tokens):
        raise ValueError(
            f"attention_flow over N={tokens} tokens solves {len(outputs) * tokens} maximum-flow "
            f"problems per sequence ({len(outputs)} output rows x {tokens} inputs; minutes or "
            f"more in pure Python); the limit is max_tokens={max_tokens} (at most the work of "
            f"its full {max_tokens} x {max_tokens} matrix): pass fewer tokens or rows, use "
            "attention_rollout, or raise max_tokens"
        )
    for index, layer in enumerate(layers):
        if not bool(torch.isfinite(layer).all()) or bool((layer < 0).any()):
            raise ValueError(
                f"layer {index} weights hold negative or non-finite values; flow needs "
                "attention probabilities (capacities in [0, 1])"
            )
    capacities = torch.stack(layers, dim=1).cpu().double()  # (B, L, N, N)
    flows = torch.stack([_flow_one(one, outputs) for one in capacities])  # (B, R, N)
    if normalise:
        flows = flows / flows.sum(-1, keepdim=True).clamp_min(1e-300)
    return flows.float().to(layers[0].device)


def flow_fits(tokens: int, rows: int, max_tokens: int = MAX_FLOW_TOKENS) -> bool:
    """Whether :func:`attention_flow` computes ``rows`` output rows over ``tokens`` tokens
    under ``max_tokens``: ``rows x tokens`` problems of ``tokens^2`` edges per layer, at most
    the ``max_tokens^4`` of the full matrix of ``max_tokens`` tokens."""
    return rows * tokens**3 <= max_tokens**4


def _check_rows(rows: Sequence[int] | None, tokens: int) -> list[int]:
    """``rows`` as a list of output indices (all ``tokens`` of them for ``None``)."""
    if rows is None:
        return list(range(tokens))
    if isinstance(rows, (str, bytes, Tensor)) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of output indices, got {type(rows).__name__}")
    outputs = list(rows)
    fine = all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < tokens for r in outputs)
    if not fine or len(set(outputs)) != len(outputs):
        raise ValueError(
            f"rows must be distinct output indices in 0 .. {tokens - 1} (N={tokens} tokens), "
            f"got {outputs}"
        )
    return outputs


def _flow_one(capacities: Tensor, outputs: list[int]) -> Tensor:
    """``(L, N, N)`` float64 capacities of one sequence -> ``(R, N)`` float64 max-flow values
    from each output in ``outputs`` (``R`` of them) to every input."""
    import networkx as nx  # installed with torch, which requires it
    from networkx.algorithms.flow import build_residual_network, preflow_push

    depth, tokens, _ = capacities.shape
    scaled = (capacities * _SCALE).round().tolist()  # exact integers as Python floats
    graph = nx.DiGraph()
    for layer in range(depth):  # edge (l + 1, i) -> (l, j): output i of layer l + 1 reads input j
        # the last layer's outputs are sources only: those not asked for carry no flow
        sources = outputs if layer == depth - 1 else range(tokens)
        for i in sources:
            for j, capacity in enumerate(scaled[layer][i]):
                if capacity > 0:
                    graph.add_edge((layer + 1, i), (layer, j), capacity=int(capacity))
    residual = build_residual_network(graph, "capacity")  # reset and reused by every problem
    flows = torch.zeros(len(outputs), tokens, dtype=torch.float64)  # (R, N_in)
    for k, i in enumerate(outputs):
        for j in range(tokens):
            source, sink = (depth, i), (0, j)
            if source in graph and sink in graph:
                value = nx.maximum_flow_value(
                    graph, source, sink, flow_func=preflow_push, residual=residual
                )
                flows[k, j] = value / _SCALE
    return flows

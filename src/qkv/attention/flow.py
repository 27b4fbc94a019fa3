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
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from qkv.attention.rollout import residual_attention

__all__ = ["MAX_FLOW_TOKENS", "attention_flow"]

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
        max_tokens: the largest ``N`` computed (the cost grows as ``N^4`` per layer); raise it
            knowingly.

    Returns:
        ``(B, N, N)`` float32; row ``i`` is how much output ``i`` draws on each input token
        (for one layer, the residual-adjusted attention ``A_1`` itself).
    """
    layers = residual_attention(weights, residual=residual, head_fusion=head_fusion)
    tokens = layers[0].size(-1)
    if tokens > max_tokens:
        raise ValueError(
            f"attention_flow over N={tokens} tokens solves {tokens**2} maximum-flow problems "
            f"per sequence (minutes or more in pure Python); the limit is max_tokens="
            f"{max_tokens}: pass fewer tokens, use attention_rollout, or raise max_tokens"
        )
    for index, layer in enumerate(layers):
        if not bool(torch.isfinite(layer).all()) or bool((layer < 0).any()):
            raise ValueError(
                f"layer {index} weights hold negative or non-finite values; flow needs "
                "attention probabilities (capacities in [0, 1])"
            )
    capacities = torch.stack(layers, dim=1).cpu().double()  # (B, L, N, N)
    flows = torch.stack([_flow_one(one) for one in capacities])  # (B, N, N)
    if normalise:
        flows = flows / flows.sum(-1, keepdim=True).clamp_min(1e-300)
    return flows.float().to(layers[0].device)


def _flow_one(capacities: Tensor) -> Tensor:
    """``(L, N, N)`` float64 capacities of one sequence -> ``(N, N)`` float64 max-flow values."""
    import networkx as nx  # installed with torch, which requires it
    from networkx.algorithms.flow import build_residual_network, preflow_push

    depth, tokens, _ = capacities.shape
    scaled = (capacities * _SCALE).round().tolist()  # exact integers as Python floats
    graph = nx.DiGraph()
    for layer in range(depth):  # edge (l + 1, i) -> (l, j): output i of layer l + 1 reads input j
        for i, row in enumerate(scaled[layer]):
            for j, capacity in enumerate(row):
                if capacity > 0:
                    graph.add_edge((layer + 1, i), (layer, j), capacity=int(capacity))
    residual = build_residual_network(graph, "capacity")  # reset and reused by every problem
    flows = torch.zeros(tokens, tokens, dtype=torch.float64)  # (N_out, N_in)
    for i in range(tokens):
        for j in range(tokens):
            source, sink = (depth, i), (0, j)
            if source in graph and sink in graph:
                value = nx.maximum_flow_value(
                    graph, source, sink, flow_func=preflow_push, residual=residual
                )
                flows[i, j] = value / _SCALE
    return flows

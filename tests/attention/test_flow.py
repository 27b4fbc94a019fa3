"""Attention flow (Abnar & Zuidema 2020) against a case worked out by hand, against the minimum cut
found by enumerating every cut of tiny layered graphs (max-flow = min-cut), and against rollout's
conventions (shapes, residual, head fusion, rows summing to 1)."""

from __future__ import annotations

import itertools

import pytest
import torch

from qkv.attention import attention_flow, attention_rollout

pytestmark = pytest.mark.usefixtures("one_thread")

# Two layers, two tokens, one head. With r = 1/2, A_l = (W_l + I) / 2:
#   W_1 = [[1, 0], [.5, .5]]  ->  A_1 = [[1, 0], [.25, .75]]   (layer-1 output i reads input j)
#   W_2 = [[1, 0], [1, 0]]    ->  A_2 = [[1, 0], [.5, .5]]
# Graph: out_i --A_2[i, m]--> mid_m --A_1[m, j]--> in_j. Max flow = sum over the two middle
# nodes of the bottleneck of each two-edge path (the paths share no edge):
#   out_0 -> in_0: min(1, 1) + min(0, .25) = 1        out_0 -> in_1: min(1, 0) + min(0, .75) = 0
#   out_1 -> in_0: min(.5, 1) + min(.5, .25) = .75    out_1 -> in_1: min(.5, 0) + min(.5, .75) = .5
# Rows normalised: [1, 0] and [.75, .5] / 1.25 = [.6, .4]. Rollout multiplies instead:
#   A_2 A_1 = [[1, 0], [.5 * 1 + .5 * .25, .5 * 0 + .5 * .75]] = [[1, 0], [.625, .375]].
W1 = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])  # (B=1, H=1, 2, 2)
W2 = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]]]])


def test_a_case_worked_by_hand():
    raw = attention_flow([W1, W2], normalise=False)
    torch.testing.assert_close(raw, torch.tensor([[[1.0, 0.0], [0.75, 0.5]]]))
    torch.testing.assert_close(attention_flow([W1, W2]), torch.tensor([[[1.0, 0.0], [0.6, 0.4]]]))


def test_rollout_of_the_same_case_by_hand():
    torch.testing.assert_close(
        attention_rollout([W1, W2]), torch.tensor([[[1.0, 0.0], [0.625, 0.375]]])
    )


def _min_cut(capacities: torch.Tensor, source: int, sink: int) -> float:
    """The smallest cut between output ``source`` and input ``sink``, by trying every cut.

    ``capacities (L, N, N)``: layer l + 1's node i has an edge to layer l's node j of capacity
    ``capacities[l, i, j]``. A cut is a set S of nodes holding the source and not the sink; its
    capacity is the sum over edges leaving S.
    """
    depth, n, _ = capacities.shape
    nodes = [(layer, t) for layer in range(depth + 1) for t in range(n)]
    source_node, sink_node = (depth, source), (0, sink)
    free = [node for node in nodes if node not in (source_node, sink_node)]
    best = float("inf")
    for chosen in itertools.product((False, True), repeat=len(free)):
        side = {source_node} | {node for node, inside in zip(free, chosen, strict=True) if inside}
        cut = sum(
            float(capacities[layer, i, j])
            for layer in range(depth)
            for i in range(n)
            for j in range(n)
            if (layer + 1, i) in side and (layer, j) not in side
        )
        best = min(best, cut)
    return best


@pytest.mark.parametrize(("layers", "n", "seed"), [(1, 3, 0), (2, 2, 1), (2, 3, 2), (3, 3, 3)])
def test_max_flow_equals_the_brute_force_min_cut(layers, n, seed):
    generator = torch.Generator().manual_seed(seed)
    # Sparse rows (some weights exactly 0) so that cuts differ a lot; 2 heads, batch of 2.
    logits = torch.randn(2, layers, 2, n, n, generator=generator, dtype=torch.float64)
    logits[torch.rand(logits.shape, generator=generator) < 0.3] = -torch.inf
    logits[..., 0] = logits[..., 0].nan_to_num(neginf=0.0)  # every row keeps a finite entry
    weights = [logits[:, layer].softmax(-1) for layer in range(layers)]  # (B, H, N, N) each
    got = attention_flow(weights, normalise=False)
    for b in range(2):
        capacities = torch.stack(
            [0.5 * w[b].double().mean(0) + 0.5 * torch.eye(n, dtype=torch.float64) for w in weights]
        )  # (L, N, N)
        expected = torch.tensor(
            [[_min_cut(capacities, i, j) for j in range(n)] for i in range(n)], dtype=torch.float64
        )
        torch.testing.assert_close(got[b].double(), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("layers", "n", "rows", "seed"), [(2, 3, [0], 4), (3, 3, [2, 0], 5)])
def test_rows_equal_the_full_matrix_and_the_brute_force_min_cut(layers, n, rows, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, layers, 2, n, n, generator=generator, dtype=torch.float64)
    logits[torch.rand(logits.shape, generator=generator) < 0.3] = -torch.inf
    logits[..., 0] = logits[..., 0].nan_to_num(neginf=0.0)  # every row keeps a finite entry
    weights = [logits[:, layer].softmax(-1) for layer in range(layers)]  # (B, H, N, N) each
    raw = attention_flow(weights, normalise=False, rows=rows)
    assert raw.shape == (2, len(rows), n)
    torch.testing.assert_close(raw, attention_flow(weights, normalise=False)[:, rows])
    torch.testing.assert_close(attention_flow(weights, rows=rows), attention_flow(weights)[:, rows])
    for b in range(2):
        capacities = torch.stack(
            [0.5 * w[b].double().mean(0) + 0.5 * torch.eye(n, dtype=torch.float64) for w in weights]
        )  # (L, N, N)
        expected = torch.tensor(
            [[_min_cut(capacities, i, j) for j in range(n)] for i in rows], dtype=torch.float64
        )
        torch.testing.assert_close(raw[b].double(), expected, atol=1e-6, rtol=0)


def test_the_limit_counts_the_rows_computed():
    # One row of N tokens is N problems: allowed while N^3 <= max_tokens^4 (N = 16 for 8).
    layer = [torch.rand(1, 16, 16).softmax(-1)]
    assert attention_flow(layer, rows=[0], max_tokens=8).shape == (1, 1, 16)
    with pytest.raises(ValueError, match=r"N=16 tokens solves 32 maximum-flow.*max_tokens=8"):
        attention_flow(layer, rows=[0, 1], max_tokens=8)
    with pytest.raises(ValueError, match=r"N=17 tokens solves 17 maximum-flow.*max_tokens=8"):
        attention_flow([torch.rand(1, 17, 17)], rows=[3], max_tokens=8)


@pytest.mark.parametrize("rows", [[5], [-1], [0, 0], [True], [1.0]])
def test_bad_rows_are_named(rows):
    with pytest.raises(ValueError, match=r"rows must be distinct output indices in 0 \.\. 4"):
        attention_flow(_random_layers(1), rows=rows)
    with pytest.raises(TypeError, match="rows must be a sequence of output indices, got int"):
        attention_flow(_random_layers(1), rows=0)  # type: ignore[arg-type]


def _random_layers(layers: int, heads: int = 3, n: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(layers)
    return [torch.randn(2, heads, n, n).softmax(-1) for _ in range(layers)]


def test_one_layer_is_the_residual_adjusted_attention():
    (layer,) = _random_layers(1)
    adjusted = 0.5 * layer.mean(1) + 0.5 * torch.eye(5)  # (B, N, N): A_1
    torch.testing.assert_close(attention_flow([layer], normalise=False), adjusted)
    torch.testing.assert_close(attention_flow([layer]), adjusted)
    torch.testing.assert_close(attention_flow([layer]), attention_rollout([layer]))


def test_follows_rollouts_conventions():
    layers = _random_layers(3)
    flow = attention_flow(layers)
    assert flow.shape == attention_rollout(layers).shape == (2, 5, 5)
    assert flow.dtype == torch.float32
    torch.testing.assert_close(flow.sum(-1), torch.ones(2, 5))
    assert bool((flow >= 0).all())
    # residual 1: every layer is the identity, so each output flows only to its own input
    torch.testing.assert_close(attention_flow(layers, residual=1.0), torch.eye(5).expand(2, 5, 5))
    # head-fused (B, N, N) input equals the (B, H, N, N) input with the same fusion
    fused = [w.mean(1) for w in layers]
    torch.testing.assert_close(attention_flow(fused), flow)
    maxed = attention_flow(layers, head_fusion="max")
    torch.testing.assert_close(maxed.sum(-1), torch.ones(2, 5))
    assert not torch.allclose(maxed, flow)


def test_single_paths_make_flow_equal_rollout():
    # Without the residual and with one-hot rows, each output has exactly one path to one input:
    # the bottleneck of that path is 1, and so is the product rollout takes.
    torch.manual_seed(0)
    perms = [torch.eye(4)[torch.randperm(4)].expand(1, 2, 4, 4) for _ in range(3)]
    flow = attention_flow(perms, residual=0.0)
    torch.testing.assert_close(flow, attention_rollout(perms, residual=0.0))
    assert not torch.equal(flow, torch.eye(4).expand(1, 4, 4))


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least one layer"):
        attention_flow([])
    with pytest.raises(ValueError, match=r"layer 1 weights have shape \(2, 3, 4, 4\)"):
        attention_flow([torch.rand(2, 3, 5, 5), torch.rand(2, 3, 4, 4)])
    with pytest.raises(ValueError, match=r"layer 0 weights have dtype torch.int64"):
        attention_flow([torch.ones(1, 3, 3, dtype=torch.long)])
    with pytest.raises(ValueError, match="layer 1 weights hold negative or non-finite"):
        attention_flow([torch.rand(1, 3, 3), -torch.rand(1, 3, 3)])
    with pytest.raises(ValueError, match="layer 0 weights hold negative or non-finite"):
        attention_flow([torch.full((1, 3, 3), float("nan"))])
    with pytest.raises(ValueError, match=r"N=40 tokens solves 1600 maximum-flow.*max_tokens=32"):
        attention_flow([torch.rand(1, 40, 40)])
    with pytest.raises(ValueError, match=r"N=5 tokens.*max_tokens=4"):
        attention_flow(_random_layers(1), max_tokens=4)

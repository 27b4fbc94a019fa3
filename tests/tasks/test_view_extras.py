"""The views runners return on request (ViewOptions): the query and key vectors of every layer
and head (the page's neuron view) equal what ``neuron_view`` recomputes on the model's own
attention module from the same inputs, and their scaled dot products, softmaxed over the keys
the model may attend to, give the view's weights; the encoder's rollout and flow views equal the
library's functions on the same weights, and flow is left out, saying why, above 32 tokens."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from qkv.attention.flow import MAX_FLOW_TOKENS, attention_flow
from qkv.attention.multihead import MultiHeadAttention
from qkv.attention.neuron import neuron_view
from qkv.attention.rollout import attention_rollout
from qkv.tasks.classification.runner import Classifier
from qkv.tasks.language_model.runner import LanguageModel
from qkv.tasks.spec import ViewOptions
from qkv.tasks.tagging.runner import Tagger
from qkv.tasks.translation.runner import Translator
from qkv.tasks.view_extras import check_extras, summary_views
from qkv.viz.view_json import views_json

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"
DIGITS_TOL = 1e-4  # the page data keeps 4 decimals


def layer_inputs(model: torch.nn.Module, compute) -> list[tuple[MultiHeadAttention, dict]]:
    """Each attention call's module and inputs, recorded by a forward hook of this test's own."""
    calls = []

    def hook(module, args, kwargs, output):
        calls.append((module, {"query": args[0], **kwargs}))

    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in modules]
    try:
        compute()
    finally:
        for handle in handles:
            handle.remove()
    return calls


def check_neuron_data(runner, text: str, data: dict, causal: bool) -> None:
    calls = layer_inputs(runner.model, lambda: runner.attention(text))
    neuron = data["neuron"]
    assert len(calls) == len(data["layers"]) == len(neuron["q"]) == len(neuron["k"])
    n = len(data["queries"])
    for layer, (module, inputs) in enumerate(calls):
        for head in range(module.num_heads):
            for i in range(n):
                for j in range(n):
                    nv = neuron_view(
                        module, inputs["query"].float(), head=head, query_position=i,
                        key_position=j, keep=inputs.get("keep"),
                        is_causal=inputs.get("is_causal", False),
                    )  # fmt: skip
                    q = torch.tensor(neuron["q"][layer][head][i])
                    k = torch.tensor(neuron["k"][layer][nv.kv_head][j])
                    torch.testing.assert_close(q, nv.query, atol=DIGITS_TOL, rtol=0)
                    torch.testing.assert_close(k, nv.key, atol=DIGITS_TOL, rtol=0)
                    weight = data["layers"][layer][head][i][j]
                    assert weight == pytest.approx(nv.weight, abs=DIGITS_TOL)
            # sum(q * k) / sqrt(Dk), softmaxed over the keys, is the view's weights.
            q = torch.tensor(neuron["q"][layer][head], dtype=torch.float64)  # (T, Dk)
            k = torch.tensor(neuron["k"][layer][head], dtype=torch.float64)  # (T, Dk)
            scaled = q @ k.T / math.sqrt(q.size(1))  # (T, T)
            if causal:
                scaled = scaled.masked_fill(torch.ones(n, n).triu(1).bool(), -math.inf)
            weights = torch.tensor(data["layers"][layer][head], dtype=torch.float64)
            torch.testing.assert_close(torch.softmax(scaled, -1), weights, atol=2e-3, rtol=0)


def test_classifier_neuron_data_equals_neuron_view():
    runner = Classifier.load(RUNS / "classification")
    text = "a good film about the sea"
    seen = runner.views(text, ViewOptions(neuron=True))
    (data,) = views_json(seen.views)
    assert data["id"] == "encoder"
    check_neuron_data(runner, text, data, causal=False)


def test_language_model_neuron_data_equals_neuron_view():
    runner = LanguageModel.load(RUNS / "language_model")
    text = "the cat sat"
    (data,) = views_json(runner.views(text, ViewOptions(neuron=True)).views)
    check_neuron_data(runner, text, data, causal=True)


def test_vectors_are_opt_in():
    runner = Classifier.load(RUNS / "classification")
    (data,) = views_json(runner.views("a good film").views)
    assert "neuron" not in data


@pytest.mark.parametrize("runner_type, run", [(Classifier, "classification"), (Tagger, "tagging")])
def test_rollout_and_flow_views_equal_the_library_functions(runner_type, run):
    runner = runner_type.load(RUNS / run)
    text = "the cat sat on the mat"
    seen = runner.views(text, ViewOptions(rollout=True))
    encoder, rollout, flow = seen.views
    assert (encoder.id, rollout.id, flow.id) == ("encoder", "rollout", "flow")
    assert "rollout" in rollout.title and "flow" in flow.title
    stack = [w[None] for w in encoder.layers]  # (1, H, T, T) per layer
    torch.testing.assert_close(rollout.layers[0][0], attention_rollout(stack)[0])
    torch.testing.assert_close(flow.layers[0][0], attention_flow(stack)[0])
    for view in (rollout, flow):
        assert view.queries == view.keys == encoder.queries
        sums = view.layers[0][0].sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))


def test_flow_is_left_out_above_its_limit_and_the_title_says_so():
    # The fixture models read at most 32 ids, so the views of a longer text come from weights
    # made here: 2 layers of (H=2, T, T) rows summing to one, T = MAX_FLOW_TOKENS + 1.
    n = MAX_FLOW_TOKENS + 1
    layers = [torch.softmax(torch.randn(2, n, n, generator=torch.Generator().manual_seed(s)), -1)
              for s in range(2)]  # fmt: skip
    tokens = [f"t{i}" for i in range(n)]
    (rollout,) = summary_views(tokens, layers)
    assert rollout.id == "rollout"
    assert f"flow not computed: {n} tokens, flow takes at most {MAX_FLOW_TOKENS}" in rollout.title
    torch.testing.assert_close(
        rollout.layers[0][0], attention_rollout([w[None] for w in layers])[0]
    )
    assert [v.id for v in summary_views(tokens[:-1], [w[:, :-1, :-1] for w in layers])] == [
        "rollout",
        "flow",
    ]


def test_a_task_without_them_refuses_the_request():
    runner = Translator.load(RUNS / "translation")
    with pytest.raises(ValueError, match="no rollout view: rollout is for the encoder classifier"):
        runner.views("a b", ViewOptions(rollout=True))  # the runner's own views refuse it
    with pytest.raises(ValueError, match="no query and key vectors: the neuron view is for qkv"):
        check_extras(runner.views("a b"), ViewOptions(neuron=True))

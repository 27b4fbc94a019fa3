"""DrQA's document reader (Chen et al. 2017): the pointer head against log-softmaxes of
hand-computed bilinear energies, the aligned embedding and exact-match feature by hand,
distributions over kept positions, padding invariance, gradients, decoding against brute force,
validation, and fitting a handful of answer spans."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from qkv.models.registry import FAMILIES, build_config, build_model
from qkv.models.span_reader import PRESETS, SpanPointer, SpanReader, SpanReaderConfig

pytestmark = pytest.mark.usefixtures("one_thread")

V = 30
PASSAGE_LENGTHS, QUESTION_LENGTHS = [9, 4, 6], [3, 5, 1]
FEATURES = {
    "both": {},
    "aligned-only": {"exact_match": False},
    "exact-match-only": {"aligned": False},
    "neither": {"aligned": False, "exact_match": False},
}


def tiny(**overrides) -> SpanReader:
    torch.manual_seed(0)
    return SpanReader(SpanReaderConfig.preset("tiny", V, **overrides)).eval()


def right_padded(lengths: list[int], gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(1, V, (len(lengths), max(lengths)), generator=gen)  # (B, L)
    keep = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # (B, L)
    return ids.masked_fill(~keep, 0), keep


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    passage, passage_keep = right_padded(PASSAGE_LENGTHS, gen)
    question, question_keep = right_padded(QUESTION_LENGTHS, gen)
    question[0, 1] = passage[0, 4]  # at least one exact match
    return dict(
        passage=passage,
        passage_keep=passage_keep,
        question=question,
        question_keep=question_keep,
    )


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("features", list(FEATURES))
def test_start_and_end_are_distributions_over_the_kept_positions(preset, features):
    torch.manual_seed(0)
    model = SpanReader(SpanReaderConfig.preset(preset, V, **FEATURES[features])).eval()
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
    keep, question_keep = inputs["passage_keep"], inputs["question_keep"]
    lowest = torch.finfo(torch.float32).min
    for log_probs in (out.start_log_probs, out.end_log_probs):
        assert log_probs.shape == (3, 9) and torch.isfinite(log_probs).all()
        torch.testing.assert_close(log_probs.exp().masked_fill(~keep, 0).sum(-1), torch.ones(3))
        assert (log_probs[~keep] == lowest).all()
    assert out.question_weights.shape == (3, 5)
    torch.testing.assert_close(out.question_weights.sum(-1), torch.ones(3))
    assert (out.question_weights[~question_keep] == 0).all()
    if not model.config.aligned:
        assert out.aligned is None
        return
    assert out.aligned.shape == (3, 9, 5)
    torch.testing.assert_close(out.aligned.sum(-1), keep.float())  # padded passage rows: 0
    assert (out.aligned.masked_fill(question_keep[:, None, :], 0) == 0).all()


@pytest.mark.parametrize("layers", [1, 2])
def test_an_example_alone_equals_the_same_example_padded_in_a_batch(layers):
    model = tiny(num_layers=layers)
    inputs = batch()
    with torch.no_grad():
        batched = model(**inputs)
        for row, (p, q) in enumerate(zip(PASSAGE_LENGTHS, QUESTION_LENGTHS, strict=True)):
            alone = model(
                inputs["passage"][row : row + 1, :p],
                inputs["passage_keep"][row : row + 1, :p],
                inputs["question"][row : row + 1, :q],
                inputs["question_keep"][row : row + 1, :q],
            )
            pairs = [
                (alone.start_log_probs[0], batched.start_log_probs[row, :p]),
                (alone.end_log_probs[0], batched.end_log_probs[row, :p]),
                (alone.question_weights[0], batched.question_weights[row, :q]),
                (alone.aligned[0], batched.aligned[row, :p, :q]),
            ]
            for got, expected in pairs:
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_the_pointer_is_log_softmax_of_hand_computed_bilinear_energies():
    torch.manual_seed(1)
    pointer = SpanPointer(passage_dim=6, question_dim=4).double()
    gen = torch.Generator().manual_seed(2)
    passage = torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    question = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)
    # Any keep pattern: the two may be positions of one sequence (a MiniLM's states).
    passage_keep = torch.tensor([[True, False, True, True, False], [True] * 5])
    question_keep = torch.tensor([[True, True, False], [False, True, True]])
    start, end, weights = pointer(passage, passage_keep, question, question_keep)
    b = (question @ pointer.pool_query).masked_fill(~question_keep, float("-inf")).softmax(-1)
    q = torch.einsum("bj,bjd->bd", b, question)  # (B, Dq)
    for got, score in ((start, pointer.start_score), (end, pointer.end_score)):
        energies = torch.einsum("bd,de,bse->bs", q, score.weight, passage)
        expected = energies.masked_fill(~passage_keep, float("-inf")).log_softmax(-1)
        torch.testing.assert_close(got[passage_keep], expected[passage_keep])
        assert (got[~passage_keep] == torch.finfo(torch.float64).min).all()
    torch.testing.assert_close(weights, b)


def test_the_pointer_passes_gradients_in_float64():
    torch.manual_seed(1)
    pointer = SpanPointer(3, 2).double()
    passage = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    question = torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True)
    passage_keep = torch.tensor([[True, True, True, False], [True, True, False, False]])
    question_keep = torch.tensor([[True, True, True], [True, False, False]])

    def kept(p, q):
        start, end, _ = pointer(p, passage_keep, q, question_keep)
        return start[passage_keep], end[passage_keep]

    torch.autograd.gradcheck(kept, (passage, question))


def test_the_aligned_embedding_and_the_exact_match_feature_by_hand():
    model = tiny()
    inputs = batch()
    passage, question = inputs["passage"], inputs["question"]
    passage_keep, question_keep = inputs["passage_keep"], inputs["question_keep"]
    with torch.no_grad():
        features, q, aligned = model.features(**inputs)
        e_p, e_q = model.embed(passage), model.embed(question)
        lin = model.align_proj
        energies = torch.relu(lin(e_p)) @ torch.relu(lin(e_q)).transpose(1, 2)  # (B, S, Q)
        a = energies.masked_fill(~question_keep[:, None, :], float("-inf")).softmax(-1)
        a = a * passage_keep[:, :, None]
    e = model.config.embed_dim
    assert features.shape == (3, 9, 2 * e + 1)
    torch.testing.assert_close(features[..., :e], e_p)
    torch.testing.assert_close(q, e_q)
    torch.testing.assert_close(aligned, a)
    kept = passage_keep
    torch.testing.assert_close(features[..., e : 2 * e][kept], (a @ e_q)[kept])
    for row, i in itertools.product(range(3), range(9)):
        words = question[row, : QUESTION_LENGTHS[row]].tolist()
        assert features[row, i, -1].item() == float(passage[row, i].item() in words)
    assert features[0, 4, -1] == 1


@pytest.mark.parametrize("features", list(FEATURES))
def test_every_parameter_gets_a_finite_gradient(features):
    model = tiny(num_layers=2, **FEATURES[features]).train()
    inputs = batch()
    out = model(**inputs)
    loss = -(out.start_log_probs[:, 0] + out.end_log_probs[:, 1]).sum()
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


def test_decode_is_the_best_span_within_the_configured_length():
    model = tiny(max_answer_length=3)
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
    start, end, score = model.decode(out, inputs["passage_keep"])
    for row, n in enumerate(PASSAGE_LENGTHS):
        spans = [(i, j) for i in range(n) for j in range(i, min(n, i + 3))]
        scores = [out.start_log_probs[row, i] + out.end_log_probs[row, j] for i, j in spans]
        best = max(range(len(spans)), key=lambda k: scores[k])
        assert (start[row].item(), end[row].item()) == spans[best]
        torch.testing.assert_close(score[row], scores[best])


def test_eval_mode_is_deterministic_with_dropout():
    model = tiny(dropout=0.5, num_layers=2)
    inputs = batch()
    with torch.no_grad():
        first, second = model(**inputs), model(**inputs)
    assert torch.equal(first.start_log_probs, second.start_log_probs)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"embed_dim": 0}, "embed_dim must be a positive int, got 0"),
        ({"hidden_dim": -1}, "hidden_dim must be a positive int, got -1"),
        ({"num_layers": 0}, "num_layers must be a positive int, got 0"),
        ({"max_answer_length": 0}, "max_answer_length must be a positive int, got 0"),
        ({"vocab_size": -5}, "vocab_size must be a positive int, got -5"),
        ({"dropout": 1.5}, r"dropout must be in \[0, 1\), got 1.5"),
        ({"aligned": 1}, "aligned must be true or false, got 1"),
        ({"exact_match": "yes"}, "exact_match must be true or false, got 'yes'"),
        ({"pad_id": -1}, r"pad_id must be an int in \[0, vocab_size=30\), got -1"),
    ],
)
def test_the_config_names_a_bad_value(values, message):
    with pytest.raises(ValueError, match=message):
        SpanReaderConfig(**{"vocab_size": V, **values})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda x: x["question_keep"][2].fill_(False),
         r"question has no real token in batch row\(s\) \[2\]"),
        (lambda x: x["passage_keep"][1, 0].fill_(False),
         r"batch row\(s\) \[1\] have padding between real tokens"),
        (lambda x: x["passage"][0, 0].fill_(V), rf"passage holds ids outside \[0, {V}\)"),
        (lambda x: x.update(question=x["question"].float()), "question must be a .* integer"),
    ],
)  # fmt: skip
def test_bad_inputs_are_named(change, message):
    model = tiny()
    inputs = batch()
    change(inputs)
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_the_pointer_names_bad_inputs():
    pointer = SpanPointer(4, 3)
    states, keep = torch.zeros(2, 5, 4), torch.ones(2, 5, dtype=torch.bool)
    question, question_keep = torch.zeros(2, 2, 3), torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"question_keep has no kept position in batch row\(s\) "):
        pointer(states, keep, question, torch.zeros(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"passage_keep must be a boolean .* \(2, 5\)"):
        pointer(states, keep[:, :4], question, question_keep)
    with pytest.raises(ValueError, match="differ in batch size"):
        pointer(states, keep, question[:1], question_keep[:1])
    with pytest.raises(ValueError, match="General expects query width 3 and key width 4"):
        pointer(states[..., :3], keep, question, question_keep)
    with pytest.raises(ValueError, match="SpanPointer needs positive widths"):
        SpanPointer(0, 3)


def test_the_family_is_registered_with_its_presets():
    assert FAMILIES["span_reader"] == (SpanReaderConfig, SpanReader)
    config = build_config("span_reader", {"vocab_size": V, "aligned": False, "num_layers": 1})
    assert config == SpanReaderConfig(V, num_layers=1, aligned=False)
    assert isinstance(build_model("span_reader", config), SpanReader)
    small = SpanReaderConfig.preset("small", 500)
    assert (small.embed_dim, small.hidden_dim, small.num_layers, small.dropout) == (
        128, 128, 2, 0.2,
    )  # fmt: skip


def test_the_reader_fits_a_few_answer_spans():
    """8 examples whose answer span (1-3 tokens at a random place) is marked by nothing but
    the question: fitting them means reading it."""
    gen = torch.Generator().manual_seed(4)
    n, s, q = 8, 12, 4
    passage = torch.randint(1, V, (n, s), generator=gen)
    question = torch.randint(1, V, (n, q), generator=gen)
    first = torch.randint(0, s - 3, (n,), generator=gen)
    last = first + torch.randint(0, 3, (n,), generator=gen)
    ones = torch.ones
    inputs = dict(
        passage=passage,
        passage_keep=ones(n, s, dtype=torch.bool),
        question=question,
        question_keep=ones(n, q, dtype=torch.bool),
    )
    torch.manual_seed(0)
    model = SpanReader(SpanReaderConfig.preset("tiny", V))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(300):
        optimiser.zero_grad()
        out = model(**inputs)
        loss = F.nll_loss(out.start_log_probs, first) + F.nll_loss(out.end_log_probs, last)
        loss.backward()
        optimiser.step()
        if loss.item() < 0.05:
            break
    model.eval()
    with torch.no_grad():
        start, end, _ = model.decode(model(**inputs), inputs["passage_keep"])
    assert start.tolist() == first.tolist() and end.tolist() == last.tolist(), loss.item()

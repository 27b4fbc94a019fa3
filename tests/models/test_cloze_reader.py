"""Cloze readers (Hermann et al. 2015; Chen et al. 2016; Kadlec et al. 2016): candidate scores
and attention recomputed by hand from each module's own weights; distributions over the kept
candidates and passage positions; padding invariance; gradients; validation; and each reader
fitting a handful of examples."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from qkv.models.cloze_reader import PRESETS, READERS, ClozeReader, ClozeReaderConfig, in_question
from qkv.models.registry import FAMILIES, build_config, build_model

pytestmark = pytest.mark.usefixtures("one_thread")

V = 30
PASSAGE_LENGTHS, QUESTION_LENGTHS = [9, 4, 6], [3, 5, 1]
CANDIDATE_KEEP = [[True, True, True, True], [True, True, False, False], [True, False, True, True]]


def tiny(reader: str, **overrides) -> ClozeReader:
    torch.manual_seed(0)
    return ClozeReader(ClozeReaderConfig.preset("tiny", V, reader=reader, **overrides)).eval()


def right_padded(lengths: list[int], gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(1, V, (len(lengths), max(lengths)), generator=gen)  # (B, L)
    keep = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # (B, L)
    return ids.masked_fill(~keep, 0), keep


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """Three examples of different lengths; the candidates are words of each passage (and one
    that is not), some masked."""
    gen = torch.Generator().manual_seed(seed)
    passage, passage_keep = right_padded(PASSAGE_LENGTHS, gen)
    question, question_keep = right_padded(QUESTION_LENGTHS, gen)
    candidates = torch.stack([passage[:, 0], passage[:, 2], passage[:, 3], passage[:, 1]], dim=1)
    candidates[1, 1] = 0 if passage[1, :4].eq(29).any() else 29  # maybe not in the passage
    candidate_keep = torch.tensor(CANDIDATE_KEEP)
    candidates = candidates.masked_fill(~candidate_keep, 0)
    return dict(
        passage=passage,
        passage_keep=passage_keep,
        question=question,
        question_keep=question_keep,
        candidates=candidates,
        candidate_keep=candidate_keep,
    )


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("reader", READERS)
def test_log_probs_are_a_distribution_over_the_kept_candidates(preset, reader):
    torch.manual_seed(0)
    model = ClozeReader(ClozeReaderConfig.preset(preset, V, reader=reader)).eval()
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
    keep = inputs["candidate_keep"]
    assert out.log_probs.shape == (3, 4) and torch.isfinite(out.log_probs).all()
    probs = out.log_probs.exp()
    torch.testing.assert_close(probs.masked_fill(~keep, 0).sum(-1), torch.ones(3))
    assert (probs[~keep] == 0).all()
    assert (out.log_probs[~keep] == torch.finfo(torch.float32).min).all()
    if reader == "no_attention":
        assert out.attention is None
        return
    passage_keep = inputs["passage_keep"]
    assert out.attention.shape == (3, 9)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(3))
    assert (out.attention[~passage_keep] == 0).all()


@pytest.mark.parametrize("reader", READERS)
def test_an_example_alone_equals_the_same_example_padded_in_a_batch(reader):
    model = tiny(reader)
    inputs = batch()
    with torch.no_grad():
        batched = model(**inputs)
        for row, (p, q) in enumerate(zip(PASSAGE_LENGTHS, QUESTION_LENGTHS, strict=True)):
            kept = inputs["candidate_keep"][row]
            alone = model(
                inputs["passage"][row : row + 1, :p],
                inputs["passage_keep"][row : row + 1, :p],
                inputs["question"][row : row + 1, :q],
                inputs["question_keep"][row : row + 1, :q],
                inputs["candidates"][row : row + 1, kept],
                inputs["candidate_keep"][row : row + 1, kept],
            )
            torch.testing.assert_close(
                alone.log_probs[0], batched.log_probs[row, kept], atol=1e-5, rtol=0
            )
            if reader != "no_attention":
                torch.testing.assert_close(
                    alone.attention[0], batched.attention[row, :p], atol=1e-5, rtol=0
                )


def test_garbage_under_padding_changes_nothing():
    model = tiny("attentive")
    inputs = batch()
    noisy = dict(inputs)
    for name in ("passage", "question"):
        keep = inputs[f"{name}_keep"]
        noisy[name] = inputs[name].masked_fill(~keep, 7)
    noisy["candidates"] = inputs["candidates"].masked_fill(~inputs["candidate_keep"], 5)
    with torch.no_grad():
        clean, dirty = model(**inputs), model(**noisy)
    torch.testing.assert_close(clean.log_probs, dirty.log_probs, atol=1e-6, rtol=0)
    torch.testing.assert_close(clean.attention, dirty.attention, atol=1e-6, rtol=0)


def encoded(model: ClozeReader, inputs):
    passage_run, question_run = model.encode(
        inputs["passage"], inputs["passage_keep"], inputs["question"], inputs["question_keep"]
    )
    return passage_run.states, question_run.final  # y (B, S, 2H) and u (B, 2H)


def candidate_log_probs(model, g, inputs):
    """``log softmax_c((U g) . E(c))`` over the kept candidates, by hand."""
    scores = torch.einsum("bce,ed,bd->bc", model.embed(inputs["candidates"]),
                          model.output_proj.weight, g)  # fmt: skip
    scores = scores.masked_fill(~inputs["candidate_keep"], float("-inf"))
    return F.log_softmax(scores, dim=-1)


def hand_softmax(energies, keep):
    return F.softmax(energies.masked_fill(~keep, float("-inf")), dim=-1)


def test_the_stanford_reader_is_bilinear_attention_and_a_tied_output_by_hand():
    model = tiny("stanford")
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
        y, u = encoded(model, inputs)
        alpha = hand_softmax(torch.einsum("bd,de,bse->bs", u, model.score.weight, y),
                             inputs["passage_keep"])  # fmt: skip
        o = torch.einsum("bs,bsd->bd", alpha, y)
        expected = candidate_log_probs(model, o, inputs)
    torch.testing.assert_close(out.attention, alpha)
    keep = inputs["candidate_keep"]
    torch.testing.assert_close(out.log_probs[keep], expected[keep])


def test_the_attentive_reader_follows_hermann_et_al_by_hand():
    model = tiny("attentive")
    inputs = batch()
    score = model.score
    with torch.no_grad():
        out = model(**inputs)
        y, u = encoded(model, inputs)
        m = torch.tanh(y @ score.key_proj.weight.T + (u @ score.query_proj.weight.T)[:, None])
        s = hand_softmax(m @ score.v.weight[0], inputs["passage_keep"])  # (B, S)
        r = torch.einsum("bs,bsd->bd", s, y)
        g = torch.tanh(model.combine(torch.cat([r, u], dim=-1)))
        expected = candidate_log_probs(model, g, inputs)
    torch.testing.assert_close(out.attention, s)
    keep = inputs["candidate_keep"]
    torch.testing.assert_close(out.log_probs[keep], expected[keep])


def test_the_reader_without_attention_reads_the_final_states_by_hand():
    model = tiny("no_attention")
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
        passage_run, question_run = model.encode(
            inputs["passage"], inputs["passage_keep"], inputs["question"], inputs["question_keep"]
        )
        # The final states are the forward state at the last real token and the backward
        # state at the first.
        h = model.config.hidden_dim
        for row, n in enumerate(PASSAGE_LENGTHS):
            states = passage_run.states[row]
            torch.testing.assert_close(passage_run.final[row, :h], states[n - 1, :h])
            torch.testing.assert_close(passage_run.final[row, h:], states[0, h:])
        g = torch.tanh(model.combine(torch.cat([passage_run.final, question_run.final], -1)))
        expected = candidate_log_probs(model, g, inputs)
    keep = inputs["candidate_keep"]
    torch.testing.assert_close(out.log_probs[keep], expected[keep])


def test_the_attention_sum_reader_sums_the_attention_on_each_candidates_occurrences():
    model = tiny("as_reader")
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs)
        y, u = encoded(model, inputs)
        s = hand_softmax(torch.einsum("bd,bsd->bs", u, y), inputs["passage_keep"])
    torch.testing.assert_close(out.attention, s)
    passage, candidates, keep = inputs["passage"], inputs["candidates"], inputs["candidate_keep"]
    for row, n in enumerate(PASSAGE_LENGTHS):
        mass = torch.zeros(4)
        for c in range(4):
            for i in range(n):  # only the real tokens
                if passage[row, i] == candidates[row, c]:
                    mass[c] += s[row, i]
        mass = mass * keep[row]
        expected = mass / mass.sum()
        torch.testing.assert_close(out.log_probs[row].exp(), expected, atol=1e-6, rtol=1e-5)


def test_a_candidate_absent_from_the_passage_gets_a_tiny_finite_log_probability():
    model = tiny("as_reader")
    inputs = batch()
    inputs["candidates"][0, 3] = 0  # the pad id: never a kept passage token
    inputs["passage"][0, 0] = 3
    inputs["candidates"][0, 0] = 3  # ... while candidate 0 now surely occurs
    with torch.no_grad():
        out = model(**inputs)
    assert torch.isfinite(out.log_probs).all()
    assert out.log_probs[0, 3] < -80 and out.log_probs[0, 3].exp() < 1e-30


@pytest.mark.parametrize("reader", READERS)
def test_every_parameter_gets_a_finite_gradient(reader):
    model = tiny(reader).train()
    inputs = batch()
    out = model(**inputs)
    loss = -out.log_probs[:, 0].sum()
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name
    # The padding embedding is zero and stays so.
    assert (model.embed.weight.grad[model.config.pad_id] == 0).all()


def test_eval_mode_is_deterministic_with_dropout():
    model = tiny("attentive", dropout=0.5)
    inputs = batch()
    with torch.no_grad():
        first, second = model(**inputs), model(**inputs)
    assert torch.equal(first.log_probs, second.log_probs)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"reader": "impatient"}, "reader must be one of .*, got 'impatient'"),
        ({"embed_dim": 0}, "embed_dim must be a positive int, got 0"),
        ({"hidden_dim": -3}, "hidden_dim must be a positive int, got -3"),
        ({"attention_dim": 2.5}, "attention_dim must be a positive int, got 2.5"),
        ({"vocab_size": 0}, "vocab_size must be a positive int, got 0"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\), got -0.1"),
        ({"pad_id": 30}, r"pad_id must be an int in \[0, vocab_size=30\), got 30"),
    ],
)
def test_the_config_names_a_bad_value(values, message):
    with pytest.raises(ValueError, match=message):
        ClozeReaderConfig(**{"vocab_size": V, **values})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda x: x["question_keep"][2].fill_(False), r"question has no real token in batch "
                                                       r"row\(s\) \[2\]"),
        (lambda x: x["candidate_keep"][1].fill_(False), r"no candidate in batch row\(s\) \[1\]"),
        (lambda x: x["passage_keep"][0, 1].fill_(False), r"batch row\(s\) \[0\] have padding "
                                                         "between real tokens"),
        (lambda x: x["candidates"][0, 0].fill_(V), rf"candidates holds ids outside \[0, {V}\)"),
        (lambda x: x.update(candidate_keep=x["candidate_keep"].long()),
         "candidate_keep must be a boolean"),
        (lambda x: x.update(passage_keep=x["passage_keep"][:, :3]),
         r"passage_keep must be a boolean \(B, L\) tensor of passage's shape \(3, 9\)"),
    ],
)  # fmt: skip
def test_bad_inputs_are_named(change, message):
    model = tiny("as_reader")
    inputs = batch()
    change(inputs)
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_the_family_is_registered_with_its_presets():
    assert FAMILIES["cloze_reader"] == (ClozeReaderConfig, ClozeReader)
    config = build_config("cloze_reader", {"vocab_size": V, "reader": "stanford", "embed_dim": 8})
    assert config == ClozeReaderConfig(V, "stanford", embed_dim=8)
    assert isinstance(build_model("cloze_reader", config), ClozeReader)
    small = ClozeReaderConfig.preset("small", 500)
    assert (small.embed_dim, small.hidden_dim, small.dropout, small.reader) == (
        128, 128, 0.1, "as_reader",
    )  # fmt: skip


def fixed_examples(n: int = 8) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``n`` examples with the same 4 candidate words (in a shuffled order, each once in its
    passage) and a random answer: no word is the answer more than another, so fitting them
    means reading the question and the passage."""
    gen = torch.Generator().manual_seed(3)
    s, q, c = 10, 4, 4
    words = torch.arange(2, 2 + c)  # the candidates; the filler is drawn from the other ids
    passage = torch.randint(2 + c, V, (n, s), generator=gen)
    candidates = torch.stack([words[torch.randperm(c, generator=gen)] for _ in range(n)])
    where = torch.stack([torch.randperm(s, generator=gen)[:c] for _ in range(n)])  # (n, C)
    passage.scatter_(1, where, candidates)  # every candidate occurs once in its passage
    question = torch.randint(2 + c, V, (n, q), generator=gen)
    question[:, 1] = 1  # the blank, XXXXX
    answers = torch.randint(0, c, (n,), generator=gen)
    ones = torch.ones
    inputs = dict(
        passage=passage,
        passage_keep=ones(n, s, dtype=torch.bool),
        question=question,
        question_keep=ones(n, q, dtype=torch.bool),
        candidates=candidates,
        candidate_keep=ones(n, c, dtype=torch.bool),
    )
    return inputs, answers


@pytest.mark.parametrize("reader", READERS)
def test_each_reader_fits_a_few_examples(reader):
    torch.manual_seed(0)
    model = ClozeReader(ClozeReaderConfig.preset("tiny", V, reader=reader))
    inputs, answers = fixed_examples()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(300):
        optimiser.zero_grad()
        loss = F.nll_loss(model(**inputs).log_probs, answers)
        loss.backward()
        optimiser.step()
        if loss.item() < 0.05:
            break
    with torch.no_grad():
        predicted = model.eval()(**inputs).log_probs.argmax(-1)
    assert predicted.tolist() == answers.tolist(), loss.item()


def test_an_untied_stanford_reader_matches_its_own_output_embedding_by_hand():
    model = tiny("stanford", tie_output=False)
    inputs = batch()
    with torch.no_grad():
        model.answer_embed.weight.normal_()  # nothing like the input embedding
        out = model(**inputs)
        y, u = encoded(model, inputs)
        alpha = hand_softmax(torch.einsum("bd,de,bse->bs", u, model.score.weight, y),
                             inputs["passage_keep"])  # fmt: skip
        o = torch.einsum("bs,bsd->bd", alpha, y)
        scores = torch.einsum("bce,ed,bd->bc", model.answer_embed(inputs["candidates"]),
                              model.output_proj.weight, o)  # fmt: skip
        expected = F.log_softmax(scores.masked_fill(~inputs["candidate_keep"], float("-inf")), -1)
        tied = candidate_log_probs(model, o, inputs)
    keep = inputs["candidate_keep"]
    torch.testing.assert_close(out.log_probs[keep], expected[keep])
    assert not torch.allclose(out.log_probs[keep], tied[keep])  # not the input embedding's


def test_the_question_feature_marks_the_passage_words_of_the_question_by_hand():
    passage = torch.tensor([[5, 7, 9, 7, 0], [3, 4, 4, 6, 8]])  # (B, S)
    question = torch.tensor([[7, 2, 0], [8, 9, 6]])  # (B, Q); row 0's 0 is padding
    question_keep = torch.tensor([[True, True, False], [True, True, True]])
    seen = in_question(passage, question, question_keep).squeeze(-1)
    # row 0: only 7 occurs in its question (the pad id 0 is not a question word)
    assert seen.tolist() == [[0, 1, 0, 1, 0], [0, 0, 0, 1, 1]]


@pytest.mark.parametrize("reader", READERS)
def test_the_question_feature_is_an_input_the_passage_encoder_reads(reader):
    """The feature column is what the passage encoder gets beside the embedding: zeroing the
    encoder's weights for it gives the reader without the feature, and the column is exactly the
    in-question indicator."""
    inputs = batch()
    inputs["question"][0, :2] = inputs["passage"][0, 4:6]  # two passage words in the question
    with_feature = tiny(reader, question_feature=True)
    e = with_feature.config.embed_dim
    plain = tiny(reader)
    plain_state = plain.state_dict()
    for name, value in with_feature.state_dict().items():
        if value.shape == plain_state[name].shape:
            value.copy_(plain_state[name])
        else:  # the passage encoder's input weights: one more column, the feature's
            assert value.shape[1] == e + 1 and "passage_rnn" in name, name
            value[:, :e].copy_(plain_state[name])
            value[:, e:].zero_()
    with torch.no_grad():
        torch.testing.assert_close(with_feature(**inputs).log_probs, plain(**inputs).log_probs)
        for value in with_feature.parameters():
            if value.dim() == 2 and value.shape[1] == e + 1:
                value[:, e:].fill_(1.0)
        changed = with_feature(**inputs).log_probs
    assert not torch.allclose(changed, plain(**inputs).log_probs)
    flags = in_question(inputs["passage"], inputs["question"], inputs["question_keep"])
    assert flags[0, 4:6].eq(1).all()


def test_an_untied_output_is_refused_for_the_pointer_reader():
    with pytest.raises(ValueError, match=r"tie_output=False .* as_reader reader points"):
        ClozeReaderConfig(V, "as_reader", tie_output=False)


@pytest.mark.parametrize("name", ["tie_output", "question_feature"])
def test_the_switches_must_be_booleans(name):
    with pytest.raises(ValueError, match=f"{name} must be true or false, got 'yes'"):
        ClozeReaderConfig(V, "stanford", **{name: "yes"})

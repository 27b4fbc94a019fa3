"""Linear-chain CRF: every result against brute-force enumeration of all tag sequences (float64),
padding invariance, marginals as gradients, valid BIO from constrained decoding, and a CRF that
learns transitions its emissions cannot express."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.layers.crf import LinearChainCRF, TransitionRules, bio_transitions, constrained_decode

pytestmark = pytest.mark.usefixtures("one_thread")

BIO = ["B-PER", "I-PER", "B-LOC", "I-LOC", "O"]
FEW = settings(max_examples=25, deadline=None)


def _valid_bio(names: list[str]) -> bool:
    """The BIO rule from the tag names alone, independent of ``bio_transitions``."""
    before = "O"
    for name in names:
        if name.startswith("I-") and before[2:] != name[2:]:
            return False
        before = name
    return True


def _paths(k: int, n: int, tags: list[str] | None = None) -> torch.Tensor:
    """``(N, n)``: every sequence of ``n`` tags out of ``k`` (only valid BIO ones with ``tags``)."""
    paths = list(itertools.product(range(k), repeat=n))
    if tags is not None:
        paths = [p for p in paths if _valid_bio([tags[i] for i in p])]
    return torch.tensor(paths, dtype=torch.long)


def _brute_scores(crf: LinearChainCRF, emissions: torch.Tensor, paths: torch.Tensor):
    """``(N,)``: the score of each path over one sentence's ``emissions (n, K)``."""
    n = paths.shape[1]
    scores = crf.start[paths[:, 0]] + crf.end[paths[:, -1]]
    scores = scores + emissions[torch.arange(n), paths].sum(dim=1)  # (N, n) -> (N,)
    return scores + crf.transitions[paths[:, :-1], paths[:, 1:]].sum(dim=1)


def _crf(k: int, seed: int = 0, rules: TransitionRules | None = None, scale: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    crf = LinearChainCRF(k, rules).double()
    with torch.no_grad():
        for p in (crf.transitions, crf.start, crf.end):
            p.copy_(scale * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return crf


def _batch(lengths: list[int], k: int, seed: int = 0, pad: float | None = 1e30):
    """Emissions ``(B, W, K)`` in float64 and ``keep (B, W)``; padding holds ``pad * randn``."""
    gen = torch.Generator().manual_seed(seed + 1000)
    emissions = torch.randn(len(lengths), max(lengths), k, generator=gen, dtype=torch.float64)
    keep = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # (B, W)
    if pad is not None:
        emissions = torch.where(keep[..., None], emissions, pad * torch.randn_like(emissions))
    return emissions, keep


LENGTHS = [[5, 2, 1, 4], [3], [1, 1], [4, 4, 2]]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("lengths", LENGTHS)
def test_log_partition_score_and_viterbi_equal_brute_force(k, lengths):
    crf = _crf(k, seed=k)
    emissions, keep = _batch(lengths, k, seed=k)
    log_z = crf.log_partition(emissions, keep)
    paths, best = crf.viterbi(emissions, keep, constrained=False)
    assert log_z.dtype == torch.float64 and log_z.shape == (len(lengths),)
    for row, n in enumerate(lengths):
        every = _paths(k, n)
        brute = _brute_scores(crf, emissions[row, :n], every)
        torch.testing.assert_close(log_z[row], brute.logsumexp(0), atol=1e-5, rtol=0)
        torch.testing.assert_close(best[row], brute.max(), atol=1e-5, rtol=0)
        assert paths[row, :n].tolist() == every[brute.argmax()].tolist()
        assert paths[row, n:].eq(0).all()
        tags = every[torch.randperm(len(every))[:3]]  # (3, n): a few sequences at random
        one_row = emissions[row : row + 1, :n].expand(len(tags), -1, -1)  # (3, n, K)
        scored = crf.score(one_row, tags, torch.ones(len(tags), n, dtype=torch.bool))
        torch.testing.assert_close(scored, _brute_scores(crf, emissions[row, :n], tags))


def test_score_equals_a_hand_sum_and_ignores_padding_tags():
    crf = _crf(3, seed=7)
    emissions, keep = _batch([4, 2], 3)
    tags = torch.tensor([[2, 0, 1, 1], [1, 2, -100, -100]])  # padding may hold ignore_index
    t, s, e = crf.transitions.tolist(), crf.start.tolist(), crf.end.tolist()
    expected = []
    for row, n in enumerate([4, 2]):
        y = tags[row, :n].tolist()
        total = s[y[0]] + e[y[-1]] + sum(emissions[row, i, y[i]].item() for i in range(n))
        expected.append(total + sum(t[a][b] for a, b in itertools.pairwise(y)))
    torch.testing.assert_close(
        crf.score(emissions, tags, keep), torch.tensor(expected, dtype=torch.float64)
    )


def test_constrained_viterbi_is_the_best_valid_bio_sequence():
    rules = bio_transitions(BIO)
    crf = _crf(len(BIO), seed=3, rules=rules, scale=3.0)  # strong scores, invalid moves tempting
    lengths = [5, 3, 1, 4, 5, 2]
    emissions, keep = _batch(lengths, len(BIO), seed=3)
    emissions = 3 * emissions
    paths, best = crf.viterbi(emissions, keep)
    decoded = crf.decode(emissions, keep)
    unconstrained = crf.decode(emissions, keep, constrained=False)
    assert [len(p) for p in decoded] == lengths
    for row, n in enumerate(lengths):
        valid = _paths(len(BIO), n, BIO)
        brute = _brute_scores(crf, emissions[row, :n], valid)
        assert decoded[row] == paths[row, :n].tolist() == valid[brute.argmax()].tolist()
        torch.testing.assert_close(best[row], brute.max(), atol=1e-5, rtol=0)
    assert not all(_valid_bio([BIO[i] for i in p]) for p in unconstrained)  # the rules mattered


def test_constraints_override_learned_scores():
    crf = LinearChainCRF(len(BIO), bio_transitions(BIO))
    with torch.no_grad():
        crf.start[1] = 100.0  # I-PER first: invalid
    keep = torch.ones(1, 3, dtype=torch.bool)
    emissions = torch.zeros(1, 3, len(BIO))
    emissions[0, :, 1] = 5.0  # I-PER everywhere
    assert crf.decode(emissions, keep, constrained=False) == [[1, 1, 1]]
    assert crf.decode(emissions, keep) == [[0, 1, 1]]  # B-PER I-PER I-PER
    with torch.no_grad():
        crf.transitions[4, 1] = 100.0  # O -> I-PER: invalid
    emissions = torch.zeros(1, 2, len(BIO))
    emissions[0, 0, 4], emissions[0, 1, 1], emissions[0, 1, 0] = 5.0, 5.0, 1.0  # O, I-PER | B-PER
    assert crf.decode(emissions, keep[:, :2], constrained=False) == [[4, 1]]
    assert crf.decode(emissions, keep[:, :2]) == [[4, 0]]  # O B-PER


@given(
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    k=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    pad=st.sampled_from([1e30, -1e30, float("nan"), float("inf"), float("-inf")]),
)
@FEW
def test_padding_changes_nothing(lengths, k, seed, pad):
    """A batch gives each row's answers alone, whatever the padding holds; padding gets no grad."""
    crf = _crf(k, seed=seed)
    emissions, keep = _batch(lengths, k, seed=seed, pad=pad)
    emissions.requires_grad_(True)
    tags = torch.randint(0, k, keep.shape, generator=torch.Generator().manual_seed(seed))
    loss = crf.nll(emissions, tags, keep)
    paths, best = crf.viterbi(emissions, keep, constrained=False)
    loss.sum().backward()
    assert torch.isfinite(emissions.grad).all() and emissions.grad[~keep].eq(0).all()
    for row, n in enumerate(lengths):
        alone = emissions[row : row + 1, :n].detach()
        one = torch.ones(1, n, dtype=torch.bool)
        torch.testing.assert_close(
            loss[row : row + 1], crf.nll(alone, tags[row : row + 1, :n], one)
        )
        alone_paths, alone_best = crf.viterbi(alone, one, constrained=False)
        assert paths[row, :n].tolist() == alone_paths[0].tolist()
        torch.testing.assert_close(best[row : row + 1], alone_best)


def test_probabilities_are_at_most_one_and_sum_to_one():
    k, n = 3, 4
    crf = _crf(k, seed=11)
    emissions, keep = _batch([n], k, seed=11)
    emissions = torch.cat([emissions, torch.full((1, 1, k), 1e30, dtype=torch.float64)], dim=1)
    keep = torch.cat([keep, torch.zeros(1, 1, dtype=torch.bool)], dim=1)  # (1, n + 1): padded
    every = _paths(k, n)  # (81, 4)
    tags = torch.cat([every, torch.zeros(len(every), 1, dtype=torch.long)], dim=1)
    nll = crf.nll(emissions.expand(len(every), -1, -1), tags, keep.expand(len(every), -1))
    assert (nll >= 0).all()
    torch.testing.assert_close(nll.neg().exp().sum(), torch.tensor(1.0, dtype=torch.float64))


def test_log_partition_gradients_are_the_brute_force_marginals():
    k, lengths = 3, [4, 2, 3]
    crf = _crf(k, seed=5)
    emissions, keep = _batch(lengths, k, seed=5)
    emissions.requires_grad_(True)
    crf.log_partition(emissions, keep).sum().backward()
    counts = torch.zeros(k, k, dtype=torch.float64)
    for row, n in enumerate(lengths):
        every = _paths(k, n)
        p = _brute_scores(crf, emissions[row, :n].detach(), every).detach().softmax(0)  # (N,)
        one_hot = torch.nn.functional.one_hot(every, k).double()  # (N, n, K)
        marginals = torch.einsum("p,pik->ik", p, one_hot)  # (n, K)
        torch.testing.assert_close(emissions.grad[row, :n], marginals)
        assert emissions.grad[row, n:].eq(0).all()
        counts += torch.einsum("p,pia,pib->ab", p, one_hot[:, :-1], one_hot[:, 1:])
    torch.testing.assert_close(crf.transitions.grad, counts)


def test_nll_gradcheck():
    crf = _crf(3, seed=2)
    emissions, keep = _batch([3, 1, 2], 3, seed=2)
    tags = torch.tensor([[0, 2, 1], [1, -100, -100], [2, 2, -100]])
    emissions.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda em: crf.nll(em, tags, keep), (emissions,))


@given(
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([0.5, 3.0, 10.0]),
)
@FEW
def test_constrained_decode_is_the_best_valid_sequence(lengths, seed, scale):
    gen = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(len(lengths), max(lengths), len(BIO), generator=gen)
    log_probs = logits.double().log_softmax(-1)
    keep = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # (B, W)
    decoded = constrained_decode(log_probs, keep, bio_transitions(BIO))
    for row, n in enumerate(lengths):
        assert len(decoded[row]) == n and _valid_bio([BIO[i] for i in decoded[row]])
        valid = _paths(len(BIO), n, BIO)
        sums = log_probs[row, torch.arange(n), valid].sum(dim=1)  # (N,)
        assert decoded[row] == valid[sums.argmax()].tolist()


@given(
    rows=st.lists(
        st.lists(
            st.lists(st.sampled_from([0.0, -1.0, -3.0]), min_size=5, max_size=5),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=3,
    )
)
@FEW
def test_constrained_decode_never_outputs_invalid_bio_even_with_ties(rows):
    lengths = [len(r) for r in rows]
    log_probs = torch.zeros(len(rows), max(lengths), len(BIO))
    for b, r in enumerate(rows):
        log_probs[b, : len(r)] = torch.tensor(r)
    keep = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # (B, W)
    decoded = constrained_decode(log_probs, keep, bio_transitions(BIO))
    for row, n in enumerate(lengths):
        assert len(decoded[row]) == n and _valid_bio([BIO[i] for i in decoded[row]])
        chosen = log_probs[row, torch.arange(n), torch.tensor(decoded[row])].sum()
        valid = _paths(len(BIO), n, BIO)
        assert chosen == log_probs[row, torch.arange(n), valid].sum(dim=1).max()


def test_unconstrained_decode_of_a_softmax_is_the_argmax():
    log_probs = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    keep = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    decoded = constrained_decode(log_probs, keep, TransitionRules.unconstrained(5))
    argmax = log_probs.argmax(-1).tolist()
    assert decoded == [argmax[0], argmax[1][:2], argmax[2][:1]]


def test_bio_transitions():
    rules = bio_transitions(["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC-X", "I-MISC-X"])
    allowed = [  # row: the tag before; column: the tag after
        [1, 1, 0, 1, 0, 1, 0],
        [1, 1, 1, 1, 0, 1, 0],
        [1, 1, 1, 1, 0, 1, 0],
        [1, 1, 0, 1, 1, 1, 0],
        [1, 1, 0, 1, 1, 1, 0],
        [1, 1, 0, 1, 0, 1, 1],
        [1, 1, 0, 1, 0, 1, 1],
    ]
    assert rules.allowed.tolist() == [[bool(v) for v in row] for row in allowed]
    assert rules.start.tolist() == [True, True, False, True, False, True, False]
    assert rules.end.all() and rules.num_tags == 7
    free = TransitionRules.unconstrained(3)
    assert free.allowed.all() and free.start.all() and free.end.all() and free.num_tags == 3


@pytest.mark.parametrize(
    "tags", [["O", "PER"], ["O", "B-"], ["O", "I"], ["o"], ["b-PER"], ["E-PER"]]
)
def test_bio_transitions_names_a_bad_tag(tags):
    with pytest.raises(ValueError, match=rf"{tags[-1]!r}.*O, B-TYPE and I-TYPE"):
        bio_transitions(tags)


@pytest.mark.parametrize(
    ("tags", "match"),
    [([], "non-empty"), ("O", "non-empty"), (["O", "B-X", "O"], "'O' appears twice")],
)
def test_bio_transitions_refuses_empty_and_duplicate_tag_sets(tags, match):
    with pytest.raises(ValueError, match=match):
        bio_transitions(tags)


def _inputs():
    return (
        torch.zeros(2, 3, 4),
        torch.ones(2, 3, dtype=torch.bool),
        torch.zeros(2, 3, dtype=torch.long),
    )


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda e, k, t: (e[0], k, t), r"\(B, W, K\) tensor, got \(3, 4\)"),
        (lambda e, k, t: (e[..., :3], k, t), r"K = num_tags = 4, got shape \(2, 3, 3\)"),
        (lambda e, k, t: (e.long(), k, t), "floating point, got torch.int64"),
        (lambda e, k, t: (e[:, :0], k[:, :0], t[:, :0]), "W = 0"),
        (lambda e, k, t: (e, k.float(), t), "boolean keep-mask"),
        (lambda e, k, t: (e, k[:, :2], t), r"\(B, W\) = \(2, 3\).*got shape \(2, 2\)"),
        (lambda e, k, t: (e, torch.tensor([[1, 1, 1], [0, 0, 0]]).bool(), t), "row 1 of keep"),
        (
            lambda e, k, t: (e, torch.tensor([[1, 1, 1], [1, 0, 1]]).bool(), t),
            "row 1 .*pad on the right",
        ),
        (lambda e, k, t: (e, k, t.int()), "torch.long tensor, got torch.int32"),
        (lambda e, k, t: (e, k, t[:, :2]), r"tags must be \(B, W\) = \(2, 3\)"),
        (
            lambda e, k, t: (e, k, t.index_fill(1, torch.tensor([2]), 4)),
            r"tags\[0, 2\] = 4 .*\[0, 4\)",
        ),
        (lambda e, k, t: (e, k, t - 1), r"tags\[0, 0\] = -1"),
    ],
)
def test_errors_name_the_bad_input(change, match):
    crf = LinearChainCRF(4)
    emissions, keep, tags = change(*_inputs())
    with pytest.raises(ValueError, match=match):
        crf.nll(emissions, tags, keep)


def test_errors_on_rules_and_impossible_paths():
    with pytest.raises(ValueError, match="num_tags = 4 tags, got 5"):
        LinearChainCRF(4, bio_transitions(BIO))
    with pytest.raises(ValueError, match="positive int, got 0"):
        LinearChainCRF(0)
    with pytest.raises(ValueError, match=r"\(K, K\).*got shape \(2, 3\)"):
        TransitionRules(
            torch.ones(2, 3, dtype=torch.bool), torch.ones(2).bool(), torch.ones(2).bool()
        )
    with pytest.raises(ValueError, match=r"bool tensor, got torch.float32"):
        TransitionRules(torch.ones(2, 2), torch.ones(2).bool(), torch.ones(2).bool())
    emissions, keep, _ = _inputs()
    with pytest.raises(ValueError, match=r"K = rules.num_tags = 5, got shape \(2, 3, 4\)"):
        constrained_decode(emissions, keep, bio_transitions(BIO))
    only_inside = bio_transitions(["I-PER", "I-LOC", "I-X", "I-Y"])  # nothing may start
    with pytest.raises(ValueError, match=r"row 0 .*rules allow none"):
        constrained_decode(emissions, keep, only_inside)
    assert (
        constrained_decode(emissions, keep, bio_transitions(["B-A", "I-A", "I-B", "O"]))
        == [[0] * 3] * 2
    )


def test_low_precision_emissions_recurse_in_float32():
    crf = _crf(5, seed=1).float()
    emissions, keep = _batch([5, 3], 5, seed=1, pad=1e30)
    tags = torch.randint(0, 5, keep.shape, generator=torch.Generator().manual_seed(1))
    half = emissions.to(torch.bfloat16).requires_grad_(True)  # padding overflows to inf in bf16
    loss = crf.nll(half, tags, keep)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, crf.nll(half.detach().float(), tags, keep))
    loss.sum().backward()
    assert half.grad.dtype == torch.bfloat16 and torch.isfinite(half.grad).all()
    assert crf.decode(half, keep) == crf.decode(half.float(), keep)


def test_state_dict_holds_only_the_learned_scores():
    crf = LinearChainCRF(len(BIO), bio_transitions(BIO))
    assert sorted(crf.state_dict()) == ["end", "start", "transitions"]
    assert all(p.eq(0).all() for p in crf.parameters())
    assert crf.rules.allowed.equal(bio_transitions(BIO).allowed)


def test_training_learns_transitions_the_emissions_cannot_express():
    """Word ``b`` is tag 1 right after an ``a`` (tag 0) and tag 2 elsewhere: a per-word emission
    cannot tell them apart, so decoding recovers gold only if the transitions are learned, which
    needs the right gradient of ``log Z``."""
    torch.manual_seed(0)
    sentences = {"ab": [0, 1], "bb": [2, 2], "abb": [0, 1, 2], "b": [2], "bab": [2, 0, 1], "a": [0]}
    width = max(len(s) for s in sentences)
    words = torch.zeros(len(sentences), width, dtype=torch.long)  # (B, W): a = 0, b = 1
    gold = torch.full((len(sentences), width), -100)
    keep = torch.zeros(len(sentences), width, dtype=torch.bool)
    for row, (text, tags) in enumerate(sentences.items()):
        words[row, : len(text)] = torch.tensor(["ab".index(c) for c in text])
        gold[row, : len(tags)] = torch.tensor(tags)
        keep[row, : len(text)] = True
    embed = torch.nn.Embedding(2, 3)  # a linear model of the one-hot word
    crf = LinearChainCRF(3)
    optimiser = torch.optim.Adam([*embed.parameters(), *crf.parameters()], lr=0.1)
    first = None
    for _ in range(150):
        loss = crf.nll(embed(words), gold, keep).mean()
        first = loss.item() if first is None else first
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert loss.item() < 0.1 * first
    expected = [tags for tags in sentences.values()]
    assert crf.decode(embed(words), keep) == expected
    assert crf.transitions[0, 1] > crf.transitions[0, 2] and crf.start[2] > crf.start[1]


def test_rules_given_to_decode_replace_the_modules_own():
    """A tagger builds its CRF without tag names and passes bio_transitions(tags) per call."""
    tags = ["B-PER", "I-PER", "O"]
    crf = LinearChainCRF(3)
    emissions = torch.tensor([[[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]]])  # I-PER I-PER is best
    keep = torch.ones(1, 2, dtype=torch.bool)
    assert crf.decode(emissions, keep) == [[1, 1]]  # the module's rules: none
    assert crf.decode(emissions, keep, rules=bio_transitions(tags)) == [[0, 1]]
    assert crf.decode(emissions, keep, constrained=False, rules=bio_transitions(tags)) == [[1, 1]]
    with pytest.raises(ValueError, match="rules are for 2 tags, this CRF scores 3"):
        crf.decode(emissions, keep, rules=bio_transitions(["B-X", "O"]))

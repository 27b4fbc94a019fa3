"""Show, Attend and Tell decoded by qkv.decoding, as every sequence model is.

greedy_search gives the captions of the step loop that ``ShowAttendTell.generate`` ran
(:func:`tests.models.captions.reference_captions`): ids, lengths and attention maps bit for bit
on each strip alone; in batches the same ids and lengths, and maps equal to float32 rounding (the
old loop stepped finished rows to the end, the search drops them, and a matrix product's last
bits depend on its number of rows). Beam 1 equals greedy; a beam as wide as the search space
finds the most probable captions of an exhaustive search scored by teacher forcing; beam
captions are valid and do not depend on their batch."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from qkv.decoding import beam_search, greedy_search
from qkv.models.show_attend_tell.model import ShowAttendTell, ShowAttendTellConfig
from tests.models.captions import greedy_captions, reference_captions

pytestmark = pytest.mark.usefixtures("one_thread")

TILE, V = 12, 9  # tiny preset: 3 x 3 regions per tile; words 3 .. 8
PAD, BOS, EOS = 0, 1, 2
NEVER = (BOS, PAD)  # never targets, so never words
GREEDY = dict(bos_id=BOS, eos_id=EOS, forbidden_ids=NEVER)
SPECIALS = dict(**GREEDY, pad_id=PAD)  # beam search's


def tiny(attention: str, seed: int) -> ShowAttendTell:
    torch.manual_seed(seed)
    config = ShowAttendTellConfig.preset(
        "tiny", V, tile_height=TILE, tile_width=TILE, attention=attention
    )
    model = ShowAttendTell(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def strips(seed: int, padded: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Eight strips of three tiles; ``padded``: some have one or two padded tiles."""
    images = torch.rand(8, 1, TILE, 3 * TILE, generator=torch.Generator().manual_seed(100 + seed))
    if not padded:
        return images, None
    counts = torch.tensor([3, 2, 1, 3, 2, 1, 3, 2])
    columns = torch.arange(9)[None, :] < 3 * counts[:, None]  # (B, n Gw)
    return images, columns[:, None, :].expand(-1, 3, -1).contiguous()  # (B, Gh, n Gw)


def with_a_clock(model: ShowAttendTell, images, keep, rate: float = 0.3) -> ShowAttendTell:
    """Make captions end at lengths that differ by strip: LSTM unit 0 counts steps (``c_t = c_0
    + rate t``, ``c_0`` spread over [-0.9, 0.9] by the strips' mean regions) and one dimension of
    the deep output carries ``tanh(c_t) - tanh(0.5)`` to ``<eos>`` alone, 20 times over."""
    h = model.config.hidden_dim
    with torch.no_grad():
        encoded = model.encode(images, keep)
        real = encoded.keep.transpose(1, 2).float()  # (B, R, 1)
        mean = (encoded.regions * real).sum(1) / real.sum(1)  # (B, D)
        direction = torch.randn(mean.size(1), generator=torch.Generator().manual_seed(0))
        x = mean @ direction  # (B,)
        scale = 3.0 / (x.max() - x.min())
        model.init_c.weight[0] = direction * scale
        model.init_c.bias[0] = -(x.max() + x.min()) / 2 * scale
        lstm = model.lstm
        for gate in range(4):  # i, f, g, o: open, keep, add rate, open
            lstm.weight_ih[gate * h].zero_()
            lstm.weight_hh[gate * h].zero_()
            lstm.bias_hh[gate * h] = 0.0
            lstm.bias_ih[gate * h] = math.atanh(rate) if gate == 2 else 10.0
        model.embed.weight[:, 0] = 0.0
        model.out_z.weight[0].zero_()
        model.out_z.bias[0] = 0.0
        model.out_h.weight[0].zero_()
        model.out_h.weight[0, 0] = 1.0
        model.out_h.bias[0] = -math.tanh(0.5)
        model.output.weight[:, 0] = 0.0
        model.output.weight[EOS, 0] = 20.0
    return model


@pytest.mark.parametrize("padded", [False, True], ids=["whole", "padded"])
@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_greedy_search_gives_the_captions_of_the_old_step_loop(attention, padded):
    lengths_seen = set()
    for seed in range(2):
        images, keep = strips(seed, padded)
        model = with_a_clock(tiny(attention, seed), images, keep)
        for max_len in (0, 2, 7):
            kwargs = dict(max_len=max_len, bos=BOS, eos=EOS, pad=PAD)
            new = greedy_captions(model, images, keep, **kwargs)
            old = reference_captions(model, images, keep, **kwargs)
            assert torch.equal(new.ids, old.ids)
            assert torch.equal(new.lengths, old.lengths)
            torch.testing.assert_close(new.attention, old.attention, atol=1e-7, rtol=0)
            lengths_seen |= set(new.lengths.tolist())
            for row in range(images.size(0)):
                one = slice(row, row + 1)
                row_keep = None if keep is None else keep[one]
                new = greedy_captions(model, images[one], row_keep, **kwargs)
                old = reference_captions(model, images[one], row_keep, **kwargs)
                assert torch.equal(new.ids, old.ids)
                assert torch.equal(new.lengths, old.lengths)
                assert torch.equal(new.attention, old.attention)
    # Captions that end at once, in the middle and at the limit: rows leave the batch early.
    assert {0, 2} <= lengths_seen and len(lengths_seen) >= 3


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_beam_one_equals_greedy(attention):
    lengths_seen = set()
    for padded in (False, True):
        images, keep = strips(0, padded)
        model = with_a_clock(tiny(attention, 0), images, keep)
        greedy = greedy_search(model, images, keep, max_len=3, **GREEDY)
        beam = beam_search(
            model, images, keep, beam_size=1, max_len=3, length_penalty=0.0, **SPECIALS
        )
        for g, (b,) in zip(greedy, beam, strict=True):
            assert b.tokens == g.tokens
            assert b.score == g.score == b.log_prob == g.log_prob
            assert torch.equal(b.attention, g.attention)
            lengths_seen.add(len(g.tokens))
    assert lengths_seen == {0, 1, 2, 3}


def teacher_forced_log_prob(model, image, keep, captions: list[list[int]]) -> list[float]:
    """``log P(caption + <eos>)`` of each caption, from the model's forward pass."""
    steps = max(len(c) for c in captions) + 1
    rows = torch.tensor([[BOS, *c] + [PAD] * (steps - 1 - len(c)) for c in captions])  # (N, T)
    n = len(captions)
    with torch.no_grad():
        logits = model(image.expand(n, -1, -1, -1), keep.expand(n, -1, -1), rows).logits
    log_probs = logits.double().log_softmax(-1)  # (N, T, V)
    return [
        sum(float(log_probs[i, t, token]) for t, token in enumerate([*c, EOS]))
        for i, c in enumerate(captions)
    ]


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_a_beam_as_wide_as_the_search_finds_the_best_captions_of_an_exhaustive_search(attention):
    images, keep = strips(1, padded=True)
    image, row_keep = images[1:2], keep[1:2]  # two real tiles, one padded
    model = tiny(attention, 1)
    words = range(3, V)
    every = [[]] + [list(c) for n in (1, 2) for c in itertools.product(words, repeat=n)]
    scores = teacher_forced_log_prob(model, image, row_keep, every)
    best = sorted(zip(scores, every, strict=True), key=lambda pair: -pair[0])[:5]
    wide = len(words) ** 2  # holds every live caption: the search is exhaustive
    ((*hyps,),) = beam_search(
        model, image, row_keep, beam_size=wide, n_best=5, max_len=2, length_penalty=0.0, **SPECIALS
    )
    assert [h.tokens for h in hyps] == [tokens for _, tokens in best]
    for h, (score, _) in zip(hyps, best, strict=True):
        assert h.log_prob == pytest.approx(score, abs=1e-4)


def test_beam_captions_are_valid_and_do_not_depend_on_their_batch():
    images, keep = strips(0, padded=True)
    model = with_a_clock(tiny("soft", 0), images, keep)
    kwargs = dict(beam_size=3, n_best=3, max_len=4, length_penalty=0.6, **SPECIALS)
    batch = beam_search(model, images, keep, **kwargs)
    for row, hyps in enumerate(batch):
        real = int(keep[row].sum())  # regions of the strip's real tiles
        assert len(hyps) == 3
        assert len({tuple(h.tokens) for h in hyps}) == 3
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            assert len(h.tokens) <= 4 and all(3 <= token < V for token in h.tokens)
            assert h.score == pytest.approx(h.log_prob / ((5 + len(h.tokens) + 1) / 6) ** 0.6)
            assert h.attention.shape == (len(h.tokens) + 1, real)
            torch.testing.assert_close(h.attention.sum(-1), torch.ones(len(h.tokens) + 1))
        (alone,) = beam_search(model, images[row : row + 1], keep[row : row + 1], **kwargs)
        assert [h.tokens for h in alone] == [h.tokens for h in hyps]
        assert [h.score for h in alone] == pytest.approx([h.score for h in hyps], abs=1e-4)

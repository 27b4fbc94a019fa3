"""The step protocol's inputs and encoding, for greedy and beam search alike: the inputs reach
``encode`` untouched (any number, any type), the batch size and each hypothesis's attention
columns come from the encoding's ``keep`` (real positions anywhere, not only a prefix), forbidden
tokens are never generated and do not renormalise the others, and wrong encodings are named."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
import torch
from torch import Tensor

from qkv.decoding import StepModel, beam_search, greedy_search
from qkv.models.outputs import StepOutput
from tests.decoding.scripted import (
    EOS,
    A,
    B,
    C,
    ScriptedEncoding,
    ScriptedModel,
    attention_row,
    source,
    table,
    tables,
)
from tests.decoding.test_greedy import TRAP

TOL = 1e-6


@dataclass
class Keyed:
    """The scripted model behind another ``encode``: one dict of inputs, and real positions
    that need not be a prefix (``hidden`` columns are not real in any sentence)."""

    inner: ScriptedModel
    hidden: tuple[int, ...] = ()
    calls: int = 0

    def encode(self, batch: dict[str, Tensor], note: str) -> ScriptedEncoding:
        assert note == "untouched"
        self.calls += 1
        encoded = self.inner.encode(batch["ids"], batch["lengths"])
        keep = encoded.keep.clone()
        keep[:, list(self.hidden)] = False
        return replace(encoded, keep=keep[:, None, :])  # (B, 1, S): singleton dims are fine

    def init_state(self, encoded: ScriptedEncoding) -> dict[str, Tensor]:
        return self.inner.init_state(encoded)

    def step(self, tokens: Tensor, state: dict[str, Tensor]) -> StepOutput:
        return self.inner.step(tokens, state)

    def select_state(self, state: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
        return self.inner.select_state(state, index)


def test_any_inputs_reach_encode_untouched_and_keep_picks_the_attention_columns():
    src, lengths = source([7, 8], [5, 4])
    next_probs = tables({7: TRAP, 8: table({(): {B: 0.7, EOS: 0.2}})})
    model = Keyed(ScriptedModel(next_probs), hidden=(1, 3))
    assert isinstance(model, StepModel)
    batch = {"ids": src, "lengths": lengths}
    greedy = greedy_search(model, batch, "untouched", max_len=5)
    (beam_a,), (beam_b,) = beam_search(
        model, batch, "untouched", beam_size=1, max_len=5, length_penalty=0.0
    )
    assert model.calls == 2
    assert [h.tokens for h in greedy] == [[A, C], [B]] == [beam_a.tokens, beam_b.tokens]
    for hyp, beam, table_id, length in zip(greedy, (beam_a, beam_b), (7, 8), (5, 4), strict=True):
        columns = [j for j in range(length) if j not in (1, 3)]  # in their order
        rows = [
            [attention_row(hyp.tokens[:i], table_id, 5, length)[j] for j in columns]
            for i in range(len(hyp.tokens) + 1)
        ]
        assert torch.equal(hyp.attention, torch.tensor(rows))
        assert torch.equal(beam.attention, hyp.attention)


def test_forbidden_tokens_are_never_generated_and_the_rest_keep_their_log_probs():
    src, lengths = source([7], [4])
    model = ScriptedModel(TRAP)
    # Without A, greedy takes B (0.4) then EOS (0.9): the model's own probabilities.
    (hyp,) = greedy_search(model, src, lengths, max_len=5, forbidden_ids=[A])
    assert hyp.tokens == [B]
    assert hyp.log_prob == pytest.approx(math.log(0.4 * 0.9), abs=TOL)
    hyps = beam_search(
        model,
        src,
        lengths,
        beam_size=3,
        n_best=3,
        max_len=3,
        forbidden_ids=(A, C),
        length_penalty=0,
    )[0]
    assert hyps and all(A not in h.tokens and C not in h.tokens for h in hyps)
    assert hyps[0].tokens == [B]
    assert hyps[0].log_prob == pytest.approx(math.log(0.4 * 0.9), abs=TOL)


def test_bad_forbidden_ids_and_encodings_are_named():
    src, lengths = source([7], [4])
    model = ScriptedModel(TRAP)
    with pytest.raises(ValueError, match=r"eos_id=2 cannot be forbidden"):
        greedy_search(model, src, lengths, max_len=3, forbidden_ids=[EOS])
    with pytest.raises(ValueError, match=r"eos_id=2 cannot be forbidden"):
        beam_search(model, src, lengths, beam_size=2, max_len=3, forbidden_ids=[A, EOS])
    with pytest.raises(ValueError, match=r"forbidden_ids=\[9\] are out of range .* of 6"):
        greedy_search(model, src, lengths, max_len=3, forbidden_ids=[9])

    class NoKeep(Keyed):
        def encode(self, batch, note):
            return {"memory": batch["ids"]}

    class FloatKeep(Keyed):
        def encode(self, batch, note):
            encoded = super().encode(batch, note)
            return replace(encoded, keep=encoded.keep.float())

    class WideKeep(Keyed):
        def encode(self, batch, note):
            encoded = super().encode(batch, note)
            return replace(encoded, keep=torch.ones(1, 1, 7, dtype=torch.bool))

    class TallKeep(Keyed):
        def encode(self, batch, note):
            encoded = super().encode(batch, note)
            return replace(encoded, keep=encoded.keep.expand(1, 2, 4))

    batch = {"ids": src, "lengths": lengths}
    cases = [
        (NoKeep, r"keep is a bool tensor \(B, \.\., S\) .* got NoneType"),
        (FloatKeep, r"got torch.float32 of shape \(1, 1, 4\)"),
        (WideKeep, r"attention over 4 positions, but the encoding's keep covers 7"),
        (TallKeep, r"keep must be \(B, 1, \.\., 1, S\), got shape \(1, 2, 4\)"),
    ]
    for kind, message in cases:
        with pytest.raises(ValueError, match=message):
            greedy_search(kind(ScriptedModel(TRAP)), batch, "untouched", max_len=3)
        with pytest.raises(ValueError, match=message):
            beam_search(kind(ScriptedModel(TRAP)), batch, "untouched", beam_size=2, max_len=3)

"""The span reader on a Transformer encoder: its start, end and null log-probabilities against
the head applied by hand to the encoder's states at [CLS] and at each word's first subword
(with each word's shape embedding beside it, when it has the casing feature), padding
invariance, both encoders (qkv's Transformer, a BERT), the loss of a window without
the answer, and refused inputs."""

from __future__ import annotations

import pytest
import torch

from qkv.models.bert.model import BertConfig
from qkv.models.encoder_span_reader import EncoderSpanReader, EncoderSpanReaderConfig
from qkv.models.registry import build_config
from qkv.tasks.reading.inputs import span_loss

pytestmark = pytest.mark.usefixtures("one_thread")

V = 40
ENCODERS = {
    "transformer": lambda: EncoderSpanReaderConfig.preset("tiny", V),
    "transformer-casing": lambda: EncoderSpanReaderConfig.preset(
        "tiny", V, casing_dim=3, num_shapes=5
    ),
    "bert": lambda: build_config(
        "encoder_span_reader",
        {"encoder": "bert", "bert": BertConfig.preset("tiny", vocab_size=V).__dict__},
    ),
}


def reader(encoder: str) -> EncoderSpanReader:
    torch.manual_seed(0)
    return EncoderSpanReader(ENCODERS[encoder]()).eval()


def window_inputs(casing: bool = False) -> dict[str, torch.Tensor]:
    """Two rows: 11 and 7 ids; row 0 has 2 question words and 4 passage words (one of two
    subwords), row 1 has 1 question word and 3 passage words; with ``casing``, their shapes."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, (2, 11), generator=gen)
    keep = torch.arange(11)[None] < torch.tensor([[11], [7]])
    ids = ids.masked_fill(~keep, 0)
    shapes = {"passage_shapes": torch.tensor([[1, 4, 2, 1], [3, 1, 4, 0]])} if casing else {}
    return dict(
        **shapes,
        ids=ids,
        keep=keep,
        passage_first=torch.tensor([[4, 5, 7, 9], [3, 4, 5, 0]]),
        passage_keep=torch.tensor([[True] * 4, [True, True, True, False]]),
        question_first=torch.tensor([[1, 2], [1, 0]]),
        question_keep=torch.tensor([[True, True], [True, False]]),
    )


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_the_head_reads_cls_and_each_words_first_subword(encoder):
    model, inputs = reader(encoder), window_inputs(casing="casing" in encoder)
    with torch.no_grad():
        out = model(**inputs)
        hidden = model.encoder(inputs["ids"], keep=inputs["keep"]).hidden  # (B, T, D)
        for row in range(2):
            words = inputs["passage_first"][row][inputs["passage_keep"][row]].tolist()
            asked = inputs["question_first"][row][inputs["question_keep"][row]].tolist()
            passage = hidden[row, [0, *words]][None]  # [CLS] first: the null answer
            if model.casing is not None:  # each word's shape embedding beside it; 0 at [CLS]
                shapes = [0, *inputs["passage_shapes"][row, : len(words)].tolist()]
                passage = torch.cat([passage, model.casing.weight[shapes][None]], dim=-1)
            question = hidden[row, asked][None]
            start, end, _ = model.pointer(
                passage, torch.ones(1, len(words) + 1, dtype=torch.bool),
                question, torch.ones(1, len(asked), dtype=torch.bool),
            )  # fmt: skip
            n = len(words)
            torch.testing.assert_close(out.start_log_probs[row, :n], start[0, 1:])
            torch.testing.assert_close(out.end_log_probs[row, :n], end[0, 1:])
            torch.testing.assert_close(out.null_log_probs[row], start[0, 0] + end[0, 0])
            # [null; words] is one distribution for the start, and one for the end
            total = torch.logsumexp(torch.cat([start[0, :1], out.start_log_probs[row, :n]]), 0)
            torch.testing.assert_close(total, torch.tensor(0.0), atol=1e-5, rtol=0)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_a_row_reads_the_same_alone_and_beside_a_longer_one(encoder):
    casing = "casing" in encoder
    model, inputs = reader(encoder), window_inputs(casing)
    alone = {
        **({"passage_shapes": inputs["passage_shapes"][1:, :3]} if casing else {}),
        "ids": inputs["ids"][1:, :7],
        "keep": inputs["keep"][1:, :7],
        "passage_first": inputs["passage_first"][1:, :3],
        "passage_keep": inputs["passage_keep"][1:, :3],
        "question_first": inputs["question_first"][1:, :1],
        "question_keep": inputs["question_keep"][1:, :1],
    }
    with torch.no_grad():
        both, one = model(**inputs), model(**alone)
    torch.testing.assert_close(both.start_log_probs[1, :3], one.start_log_probs[0])
    torch.testing.assert_close(both.end_log_probs[1, :3], one.end_log_probs[0])
    torch.testing.assert_close(both.null_log_probs[1], one.null_log_probs[0])


def test_decode_never_answers_null_and_respects_the_length():
    model, inputs = reader("transformer"), window_inputs()
    with torch.no_grad():
        out = model(**inputs)
    start, end, score = model.decode(out, inputs["passage_keep"])
    assert (start <= end).all() and (end - start < model.config.max_answer_length).all()
    assert end[1] < 3  # the padded word is never an answer
    expected = out.start_log_probs[0, start[0]] + out.end_log_probs[0, end[0]]
    torch.testing.assert_close(score[0], expected)


def test_a_window_without_the_answer_learns_the_null():
    start = torch.log(torch.tensor([[0.2, 0.3], [0.1, 0.4]]))  # words; null has the rest
    end = torch.log(torch.tensor([[0.5, 0.25], [0.3, 0.3]]))
    null = torch.log(torch.tensor([0.5 * 0.25, 0.5 * 0.4]))
    spans = torch.tensor([[[0, 1]], [[0, 0]]])
    keep = torch.tensor([[True], [False]])  # row 1: no answer in this window
    loss = span_loss(start, end, spans, keep, null)
    expected = -(torch.log(torch.tensor(0.2 * 0.25)) + torch.log(torch.tensor(0.5 * 0.4)))
    torch.testing.assert_close(loss, expected)
    with pytest.raises(ValueError, match="no gold span"):
        span_loss(start, end, spans, keep)


def test_training_moves_the_null_and_the_answer():
    model = reader("transformer").train()
    inputs = window_inputs()
    spans, keep = torch.tensor([[[2, 3]], [[0, 0]]]), torch.tensor([[True], [False]])
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        out = model(**inputs)
        loss = span_loss(out.start_log_probs, out.end_log_probs, spans, keep, out.null_log_probs)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"passage_first": torch.tensor([[4, 5, 7, 11], [3, 4, 5, 0]])}, "passage_first must lie"),
        ({"passage_first": torch.tensor([[4.0, 5, 7, 9], [3, 4, 5, 0]])}, "long tensor"),
        ({"question_keep": torch.tensor([[1, 1], [1, 0]])}, "question_keep must be a boolean"),
        ({"passage_keep": torch.tensor([[True] * 4, [False] * 4])}, "no kept position"),
    ],
)
def test_bad_inputs_are_refused(change, message):
    model = reader("transformer")
    with pytest.raises(ValueError, match=message):
        model(**{**window_inputs(), **change})


def test_word_shapes_are_needed_exactly_with_the_casing_feature():
    with pytest.raises(ValueError, match="pass passage_shapes"):
        reader("transformer-casing")(**window_inputs())
    with pytest.raises(ValueError, match="no casing"):
        reader("transformer")(**window_inputs(casing=True))


def test_the_config_needs_exactly_one_encoder():
    with pytest.raises(ValueError, match="exactly one"):
        EncoderSpanReaderConfig(None)
    with pytest.raises(ValueError, match="max_answer_length"):
        EncoderSpanReaderConfig.preset("tiny", V, max_answer_length=0)

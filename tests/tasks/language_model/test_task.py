"""The language-model task end to end on a small real-looking text: it learns, generates,
scores itself, and refuses bad input clearly."""

from __future__ import annotations

import itertools
import math
import string

import pytest
import torch

from qkv.decoding.sampling import SamplingConfig
from qkv.tasks.language_model.inputs import lm_batches
from qkv.tasks.language_model.runner import LanguageModel
from qkv.tasks.run_config import run_config_from_dict
from qkv.tasks.run_skeleton import run_training

LINE = string.ascii_lowercase + "\n"


def config(tmp_path, **train):
    text = tmp_path / "alphabet.txt"
    text.write_text(LINE * 400)
    return run_config_from_dict(
        {
            "task": "language_model",
            "name": "alphabet",
            "out_dir": str(tmp_path / "run"),
            "data": {
                "corpus": "text",
                "options": {"path": str(text), "valid_fraction": 0.1},
                "block_size": 32,
                "valid_tokens": 1000,
            },
            "model": {"family": "transformer_lm", "preset": "tiny", "num_layers": 1},
            "train": {
                "max_steps": 120,
                "batch_tokens": 512,
                "lr": 0.01,
                "schedule": "constant",
                "warmup_steps": 10,
                "label_smoothing": 0.0,
                "eval_every": 60,
                "checkpoint_every": None,
                "tensorboard": False,
                **train,
            },
            "decode": {"max_new_tokens": 30, "temperature": 0.0},
        }
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("lm")
    result = run_training(config(tmp))
    return result, LanguageModel.load(result.model_dir)


def test_it_learns_the_alphabet_and_continues_it(trained):
    result, lm = trained
    assert result.result.best["valid_loss"] < 0.05  # nats per character: it has learned
    (text,) = lm.generate(["abcd"])
    assert text == (LINE * 2)[4:34]


def test_perplexity_and_bits_per_character_agree(trained):
    _, lm = trained
    scores = lm.evaluate("valid")
    assert scores.perplexity == pytest.approx(math.exp(scores.loss))
    # one character per token: bits per character is the loss in bits
    assert scores.bits_per_char == pytest.approx(scores.loss / math.log(2))
    assert scores.chars == scores.tokens > 0


def test_stop_strings_and_streaming(trained):
    _, lm = trained
    pieces = []
    (text,) = lm.generate(["ab"], stop=["h"], on_text=lambda row, t: pieces.append(t))
    assert text == "cdefg" and "".join(pieces) == "cdefg"


def test_sampling_with_a_seed_is_reproducible(trained):
    _, lm = trained
    sampling = SamplingConfig(max_new_tokens=20, temperature=2.0, seed=7)
    assert lm.generate(["a", "k"], sampling) == lm.generate(["a", "k"], sampling)


@pytest.mark.parametrize(
    "prompt, message",
    [
        ("abc%", r"outside this model's vocabulary: \['%'\]"),
        ("a" * 300, "reads at most 256"),
    ],
)
def test_bad_prompts_are_named(trained, prompt, message):
    _, lm = trained
    with pytest.raises(ValueError, match=message):
        lm.generate([prompt])


def test_batches_are_a_deterministic_permutation_of_windows():
    ids = torch.arange(1000)
    a = list(lm_batches(ids, block_size=9, batch_size=4, seed=1, epoch=2))
    b = list(lm_batches(ids, block_size=9, batch_size=4, seed=1, epoch=2, start=3))
    assert [x.inputs.tolist() for x in a[3:]] == [x.inputs.tolist() for x in b]
    for batch in a:
        assert torch.equal(batch.targets, batch.inputs + 1)  # the next token of each input
    starts = sorted(int(x) for batch in a for x in batch.inputs[:, 0])
    assert all(q - p >= 10 for p, q in itertools.pairwise(starts))  # no overlap
    other = list(lm_batches(ids, block_size=9, batch_size=4, seed=1, epoch=3))
    assert [x.inputs.tolist() for x in other] != [x.inputs.tolist() for x in a]
    with pytest.raises(ValueError, match="fewer than one window"):
        next(lm_batches(torch.arange(5), block_size=9, batch_size=4))


def test_a_byte_level_bpe_model_trains_generates_and_counts_characters(tmp_path):
    torch.set_num_threads(1)
    text = tmp_path / "alphabet.txt"
    cfg = config(tmp_path, max_steps=20, eval_every=20)
    raw = cfg.to_dict()
    raw["data"] = {**raw["data"], "tokenizer": "bpe", "vocab_size": 300}
    result = run_training(run_config_from_dict(raw))
    lm = LanguageModel.load(result.model_dir)
    assert text.is_file() and lm.tokenizer.vocab_size <= 300
    (out,) = lm.generate(["abc"], SamplingConfig(max_new_tokens=5, temperature=0.0))
    assert isinstance(out, str)
    scores = lm.evaluate("valid")
    assert scores.chars > scores.tokens  # merges: more than one character per token
    total_bits = scores.loss * scores.tokens / math.log(2)
    assert scores.bits_per_char == pytest.approx(total_bits / scores.chars)

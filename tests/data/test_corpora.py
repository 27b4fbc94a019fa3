"""The corpus registry every kind of data uses: names, option checks, and no kind escaping it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import qkv.data
from qkv.data.corpora import CorpusRegistry
from qkv.data.errors import DataError


def load_pairs(path: str, *, limit: int = 10, lowercase: bool = False) -> tuple:
    return ("pairs", path, limit, lowercase)


def load_nothing() -> str:
    return "nothing"


@pytest.fixture
def registry() -> CorpusRegistry:
    return CorpusRegistry(
        "toy corpus",
        {"pairs": load_pairs, "empty": load_nothing},
        defaults={"pairs": {"limit": 3}},
    )


def test_names_are_listed_in_the_order_written(registry):
    assert list(registry) == ["pairs", "empty"] and len(registry) == 2
    assert "pairs" in registry and "other" not in registry
    assert registry["pairs"] is load_pairs
    assert registry.options("pairs") == ["path", "limit", "lowercase"]
    assert registry.options("empty") == []


def test_a_good_call_passes_the_options_over_the_defaults(registry):
    assert registry.load("pairs", path="p.tsv") == ("pairs", "p.tsv", 3, False)
    assert registry.load("pairs", path="p", limit=7, lowercase=True) == ("pairs", "p", 7, True)
    assert registry.load("empty") == "nothing"


def test_an_unknown_name_lists_the_known_ones(registry):
    for call in (lambda: registry.load("wmt"), lambda: registry.options("wmt")):
        with pytest.raises(DataError, match=r"^unknown toy corpus 'wmt'; known: pairs, empty$"):
            call()


def test_unknown_options_are_named_with_the_accepted_ones(registry):
    with pytest.raises(
        DataError,
        match=r"^toy corpus 'pairs' got unknown option\(s\) \['colour', 'size'\]; "
        r"its options: path, limit, lowercase$",
    ):
        registry.load("pairs", path="p", size=1, colour="red")
    with pytest.raises(DataError, match=r"got unknown option\(s\) \['path'\]; its options: none$"):
        registry.load("empty", path="p")


def test_a_missing_required_option_is_named(registry):
    with pytest.raises(DataError, match=r"^toy corpus 'pairs' needs option\(s\) \['path'\]$"):
        registry.load("pairs", limit=2)


def test_the_wording_of_a_refusal_may_be_the_kind_s_own():
    wordy = CorpusRegistry(
        "toy corpus",
        {"pairs": load_pairs},
        unknown_options="{name}: no {unknown} (only {accepted})",
        missing_options="{kind} {name} wants {missing}",
    )
    with pytest.raises(DataError, match=r"^pairs: no \['x'\] \(only path, limit, lowercase\)$"):
        wordy.load("pairs", x=1)
    with pytest.raises(DataError, match=r"^toy corpus pairs wants \['path'\]$"):
        wordy.load("pairs")


def test_loaders_whose_options_cannot_be_checked_are_refused_at_registration():
    def loose(path, **extra):
        return path

    def positional(path, /):
        return path

    for loader in (loose, positional):
        with pytest.raises(TypeError, match="cannot be passed by name"):
            CorpusRegistry("toy corpus", {"x": loader})
    with pytest.raises(ValueError, match=r"defaults \['size'\] for toy corpus 'pairs'"):
        CorpusRegistry("toy corpus", {"pairs": load_pairs}, defaults={"pairs": {"size": 1}})
    with pytest.raises(ValueError, match="defaults for toy corpus 'other'"):
        CorpusRegistry("toy corpus", {"pairs": load_pairs}, defaults={"other": {}})


REGISTRIES = {  # (module, name) of each kind's registry
    ("qkv.data.pairs.registry", "CORPORA"),
    ("qkv.data.lm.corpora", "TEXT_CORPORA"),
    ("qkv.data.labelled.sentiment", "CLASSIFICATION_CORPORA"),
    ("qkv.data.labelled.tagged", "TAGGING_CORPORA"),
    ("qkv.data.labelled.entities", "ENTITY_CORPORA"),
    ("qkv.data.images.datasets", "IMAGE_DATASETS"),
    ("qkv.data.reading.squad", "CLOZE_CORPORA"),
    ("qkv.data.reading.squad", "SPAN_CORPORA"),
}


def test_every_kind_registers_its_corpora_in_a_corpus_registry():
    found = set()
    for info in pkgutil.walk_packages(qkv.data.__path__, "qkv.data."):
        for name, value in vars(importlib.import_module(info.name)).items():
            # No kind escapes: whatever a module of qkv.data names a registry is one.
            if name.endswith(("CORPORA", "DATASETS")):
                assert isinstance(value, CorpusRegistry), f"{info.name}.{name}"
                found.add((info.name, name))
    assert found >= REGISTRIES

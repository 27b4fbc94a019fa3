"""Every allowed range the configuration reference states is the one the code enforces: each
range in a field's metadata (``ranged``/``choice`` in :mod:`qkv.config_values`) is built at its
bound and just past it, and each range recorded from a model family's checks is refused just
past it, with an error naming the field."""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from pathlib import Path

import pytest

from qkv.models.registry import FAMILIES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import site_reference

SECTION_CLASSES = [cls for found in site_reference.section_classes().values() for cls in found]
STATED = [
    (cls, f)
    for cls in SECTION_CLASSES + [FAMILIES[family][0] for family in FAMILIES]
    for f in dataclasses.fields(cls)
    if "range" in f.metadata or "choices" in f.metadata
]
RANGE = re.compile(r"^(?:(>=|>) (-?[\d.]+)|\[(-?[\d.]+), (-?[\d.]+)\))$")


def _required(cls: type) -> dict[str, int]:
    """The sizes a config cannot default (vocabularies), at a valid stand-in."""
    return {
        f.name: site_reference._SIZE
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


def _build(cls: type, name: str, value: object) -> object:
    return cls(**{**_required(cls), name: value})


def _refused(cls: type, name: str, value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(name)):
        _build(cls, name, value)


def _checks(text: str, is_int: bool) -> tuple[list[float], list[float]]:
    """The values a stated range accepts and refuses at its bounds."""
    step = 1 if is_int else 1e-6
    match = RANGE.match(text)
    assert match, f"the range {text!r} is not '>= N', '> N' or '[a, b)'"
    op, bound, low, high = match.groups()
    if op == ">=":
        return [float(bound)], [float(bound) - step]
    if op == ">":
        return [float(bound) + step], [float(bound)]
    return [float(low), float(high) - step], [float(low) - step, float(high)]


def test_ranges_are_stated():
    """The sweep below is not empty: TrainConfig states its ranges and choices."""
    names = {f.name for cls, f in STATED if cls.__name__ == "TrainConfig"}
    assert {"max_steps", "lr", "label_smoothing", "schedule", "precision"} <= names


@pytest.mark.parametrize(("cls", "f"), STATED, ids=[f"{c.__name__}.{f.name}" for c, f in STATED])
def test_a_stated_range_is_the_checks(cls, f):
    if "choices" in f.metadata:
        for value in f.metadata["choices"]:
            _build(cls, f.name, value)
        _refused(cls, f.name, "no-such-choice")
        return
    is_int = f.type in ("int", "int | None") or isinstance(f.default, int)
    accepted, refused = _checks(f.metadata["range"], is_int)
    for value in accepted:
        _build(cls, f.name, int(value) if is_int else value)
    for value in refused:
        _refused(cls, f.name, int(value) if is_int and math.isfinite(value) else value)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_recorded_range_is_refused_past_its_bound(family):
    """The ranges recorded from a family's checks (``integer >= 1``, ``[0, 1)``, ``one of``):
    a value just past each is refused with an error naming the key."""
    from qkv.models.registry import build_config

    recorded = site_reference._recorded_family(family)
    sizes = {k: site_reference._SIZE for k, h, d, _ in site_reference.family_keys(family)
             if d is dataclasses.MISSING and h is int}  # fmt: skip
    past = {"integer >= 1": 0, "integer >= 0": -1, "[0, 1)": 1.0}
    for key, allowed in recorded.items():
        value = "no-such-choice" if allowed.startswith("one of") else past[allowed]
        with pytest.raises(ValueError, match=re.escape(key)):
            build_config(family, {**sizes, key: value})

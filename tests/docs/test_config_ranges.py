"""Every allowed range the configuration reference states is the one the code enforces: each
range in a field's metadata (``ranged``/``choice`` in :mod:`qkv.config_values`) is built at its
bound and just past it, and each range recorded from a model family's checks is refused just
past it, with an error naming the field."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.registry import FAMILIES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import site_reference

SECTION_CLASSES = [cls for found in site_reference.section_classes().values() for cls in found]
STATED = [
    (cls, f)
    # The encoder families' flat keys include the nested text encoder's.
    for cls in [*SECTION_CLASSES, *(FAMILIES[family][0] for family in FAMILIES), TextEncoderConfig]
    for f in dataclasses.fields(cls)
    if "range" in f.metadata or "choices" in f.metadata
]
# A stated range (``ranged``'s grammar): ``null or `` (a field that may be None), then a
# comparison (``>= 1``, ``> 0``) or an interval (``[0, 1)``, ``(0, 1]``, ``[1, 1000]``); a bound
# is a number (``2**64`` too) or another key of the config (``[0, vocab_size)``).
_BOUND = r"-?[\d.]+(?:e-?\d+)?(?:\*\*\d+)?|[a-z_]+"
RANGE = re.compile(
    rf"^(?P<null>null or )?(?:(?P<op>>=|>) (?P<bound>{_BOUND})"
    rf"|(?P<open>[\[(])(?P<low>{_BOUND}), (?P<high>{_BOUND})(?P<close>[\])]))$"
)
# Keys a bound is built with: values of other keys that would refuse it on their own account
# (a ``d_model`` of 1 needs one head).
GIVEN = {
    ("TextEncoderConfig", "d_model"): {"num_heads": 1},
    ("ReadingDataConfig", "max_len"): {"window_overlap": 0},
}


def _required(cls: type) -> dict[str, int]:
    """The sizes a config cannot default (vocabularies), at a valid stand-in."""
    return {
        f.name: site_reference._SIZE
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


def _build(cls: type, name: str, value: object) -> object:
    given = GIVEN.get((cls.__name__, name), {})
    return cls(**{**_required(cls), **given, name: value})


def _refused(cls: type, name: str, value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(name)):
        _build(cls, name, value)


def _number(text: str, cls: type, is_int: bool) -> float:
    """A bound's value: a number, or the value the config is built with of the key it names."""
    if re.fullmatch(r"[a-z_]+", text):
        fields = {f.name: f.default for f in dataclasses.fields(cls)}
        return {**fields, **_required(cls)}[text]
    if "**" in text:
        base, power = text.split("**")
        return int(base) ** int(power)
    return int(text) if is_int else float(text)


def _checks(text: str, cls: type, is_int: bool) -> tuple[list[object], list[object]]:
    """The values a stated range accepts and refuses at its bounds."""
    step = 1 if is_int else 1e-6
    match = RANGE.match(text)
    assert match, f"the range {text!r} is not '[null or ]>= N', '> N', '[a, b)', '(a, b]'..."
    accepted: list[object] = [None] if match["null"] else []
    if match["op"]:
        bound = _number(match["bound"], cls, is_int)
        if match["op"] == ">=":
            return [*accepted, bound], [bound - step]
        return [*accepted, bound + step], [bound]
    low, high = (_number(match[end], cls, is_int) for end in ("low", "high"))
    inside = (
        {"[": low, "(": low + step}[match["open"]],
        {"]": high, ")": high - step}[match["close"]],
    )
    outside = inside[0] - step, inside[1] + step
    return [*accepted, *inside], list(outside)


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
    accepted, refused = _checks(f.metadata["range"], cls, is_int)
    for value in accepted:
        _build(cls, f.name, value)
    for value in refused:
        _refused(cls, f.name, value)


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

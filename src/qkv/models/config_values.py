"""Values read from YAML or JSON for a config dataclass: whether each fits its field's type.

A frozen config checks its ranges in ``__post_init__``; this checks the types before it is
built, so that ``d_model: "64"``, ``dropout: nan`` (which YAML reads as a string),
``vocab_size: 1.0e+12`` (a float), ``shared_vocab: 1`` (an int for a bool) or a key that is not
a name are errors naming the key, the value and what to write instead, not a ``TypeError``
from deep inside. Numbers must be finite: no setting means anything at NaN or infinity.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any


def check_values(cls: type, values: Mapping[Any, Any], section: str) -> None:
    """Raise ``ValueError`` unless every key of ``values`` is a string naming a field of the
    dataclass ``cls`` whose annotation the value fits; ``section`` prefixes the key in messages
    (``train.lr``). Unknown names are left to the caller, which knows what else is allowed."""
    for key in values:
        if not isinstance(key, str):
            raise ValueError(
                f"{section} has the key {key!r} ({type(key).__name__}); its keys are setting "
                f"names such as {section}.{next(iter(typing.get_type_hints(cls)))}"
            )
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if key not in hints:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{section}.{key} must be a finite number, got {value!r}")
        if not matches(value, hints[key]):
            raise ValueError(
                f"{section}.{key} must be {describe(hints[key])}, got {value!r} "
                f"({type(value).__name__}){_number_as_text(value)}"
            )


def _number_as_text(value: Any) -> str:
    """A hint for a number YAML read as a string (``1e12`` needs a dot and a sign: ``1.0e+12``)."""
    if not isinstance(value, str) or "e" not in value.lower():
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    return (
        "; YAML reads it as text: give an exponent a dot and a sign (1.0e+12), or write the "
        "number in full"
    )


def matches(value: Any, hint: Any) -> bool:
    """Whether a YAML/JSON value fits a field's annotation (ints pass as floats, bools do not
    pass as numbers)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(matches(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            matches(v, a) for v, a in zip(value, args, strict=True)
        )
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    return True


def describe(hint: Any) -> str:
    """What a field's annotation asks for, in words: ``an integer or null``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(describe(a) for a in args)
    if hint is type(None):
        return "null"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return "a list of numbers" if args[0] in (int, float) else f"a list of {args[0]}"
        return f"a list of {len(args)} numbers"
    if origin is dict:
        return "a mapping with string keys"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, str(hint))

"""Config values: whether a value read from YAML or JSON fits its field's type, the range
checks every config's ``__post_init__`` shares, and the flat form of a model config.

A frozen config checks its ranges in ``__post_init__`` (:func:`check_positive_ints`,
:func:`check_fractions`, :func:`check_choice`: one message for each kind of mistake, naming the
field and the value); :func:`check_values` checks the types before it is built, so that
``d_model: "64"``, ``dropout: nan`` (which YAML reads as a string), ``vocab_size: 1.0e+12`` (a
float), ``shared_vocab: 1`` (an int for a bool) or a key that is not a name are errors naming
the key, the value and what to write instead, not a ``TypeError`` from deep inside. Numbers must
be finite: no setting means anything at NaN or infinity.

A model section is flat (``d_model: 64``, ``pooling: mean``), and so is a trained model's
``config.json``. Most model configs are flat too; one that nests a part (the classifier's and
the tagger's text encoder) defines ``from_flat(values)``, ``to_flat()`` and ``flat_fields()``,
and :func:`config_from_flat`, :func:`flat_values` and :func:`flat_fields` call them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import types
import typing
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

# What the range checks below were asked inside :func:`recorded_checks` (None: outside one).
_RECORDED: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "qkv_recorded_checks", default=None
)


@contextlib.contextmanager
def recorded_checks() -> Iterator[dict[str, str]]:
    """Within the block, every :func:`check_positive_ints`, :func:`check_fractions`,
    :func:`check_casing` and :func:`check_choice` call notes the field it checked and what it
    allows, in words (``{"d_model": ">= 1", "pooling": "one of cls, mean"}``): building a config
    inside the block gives the ranges its ``__post_init__`` enforces, which the configuration
    reference states (a range it states is the check's own, so it cannot drift from it)."""
    token = _RECORDED.set({})
    try:
        found = _RECORDED.get()
        assert found is not None
        yield found
    finally:
        _RECORDED.reset(token)


def note_range(name: str, allowed: str) -> None:
    """Note, inside :func:`recorded_checks`, that the field ``name`` (``data.vocab_size``: its
    last part) allows ``allowed``; a range check calls it before it checks."""
    found = _RECORDED.get()
    if found is not None:
        found[name.rsplit(".", 1)[-1]] = allowed


def ranged(default: Any, allowed: str) -> Any:
    """A field ``default`` whose values ``__post_init__`` limits to ``allowed`` (``">= 1"``,
    ``"> 0"``, an interval ``"[0, 1)"``, ``"(0, 1]"``, ``"[1, 1000]"``; ``"null or >= 1"``
    where None is allowed too; a bound may name another key, ``"[0, vocab_size)"``), kept in
    the field's metadata for the configuration reference. ``tests/docs/test_config_ranges.py``
    builds every such field at its bound and just past it, so a stated range that the check
    does not enforce fails the tests."""
    return dataclasses.field(default=default, metadata={"range": allowed})


def choice(default: str, allowed: Collection[str]) -> Any:
    """A field ``default`` whose ``__post_init__`` accepts only the names in ``allowed`` (the
    very table it checks against, so the reference lists what the check accepts)."""
    return dataclasses.field(default=default, metadata={"choices": tuple(allowed)})


def check_positive_ints(config: object, names: Iterable[str]) -> None:
    """Raise ``ValueError`` (``d_model must be a positive int, got 0``) unless each field
    ``names`` of ``config`` is an int >= 1 (a bool is not one)."""
    for name in names:
        note_range(name, "integer >= 1")
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_bools(config: object, names: Iterable[str]) -> None:
    """Raise ``ValueError`` (``crf must be true or false, got 'yes'``) unless each field
    ``names`` of ``config`` is a bool."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")


def check_fractions(config: object, names: Iterable[str]) -> None:
    """Raise ``ValueError`` (``dropout must be in [0, 1), got 1.0``) unless each field ``names``
    of ``config`` is a number in ``[0, 1)``, as a dropout probability must be."""
    for name in names:
        note_range(name, "[0, 1)")
        value = getattr(config, name)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def check_casing(config: Any) -> None:
    """A config's casing feature: ``casing_dim`` and ``num_shapes`` ints >= 0, and at least two
    shapes to embed when ``casing_dim > 0``."""
    for name in ("casing_dim", "num_shapes"):
        note_range(name, "integer >= 0")
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if config.casing_dim and config.num_shapes < 2:
        raise ValueError(
            f"casing_dim={config.casing_dim} needs num_shapes >= 2 (the word shapes it embeds), "
            f"got {config.num_shapes}"
        )


def check_choice(name: str, value: object, allowed: Collection[object]) -> None:
    """Raise ``ValueError`` (``pooling must be one of ('cls', 'mean'), got 'sum'``) unless
    ``value`` is one of ``allowed``, shown in the message as given (a tuple, a sorted list)."""
    note_range(name, "one of " + ", ".join(str(a) for a in allowed))
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def field_hints(cls: type) -> dict[str, Any]:
    """The annotation of each field of the dataclass ``cls``, in field order (class variables
    such as ``PRESETS`` are not fields)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def flat_fields(cls: type) -> dict[str, Any]:
    """The keys of the flat form of the config class ``cls`` and the annotation of each."""
    nested = getattr(cls, "flat_fields", None)
    return nested() if nested is not None else field_hints(cls)


def config_from_flat(cls: type, values: Mapping[str, Any]) -> Any:
    """The config ``cls`` from its flat form (a model section's keys)."""
    nested = getattr(cls, "from_flat", None)
    return nested(values) if nested is not None else cls(**values)


def flat_values(config: Any) -> dict[str, Any]:
    """The flat form of ``config``, from which :func:`config_from_flat` builds it again."""
    nested = getattr(config, "to_flat", None)
    return nested() if nested is not None else dataclasses.asdict(config)


def check_values(cls: type | Mapping[str, Any], values: Mapping[Any, Any], section: str) -> None:
    """Raise ``ValueError`` unless every key of ``values`` is a string naming a field of the
    dataclass ``cls`` (or a key of the mapping of annotations ``cls``, such as
    :func:`flat_fields` gives) whose annotation the value fits; ``section`` prefixes the key in
    messages (``train.lr``). Unknown names are left to the caller, which knows what else is
    allowed."""
    hints = dict(cls) if isinstance(cls, Mapping) else typing.get_type_hints(cls)
    for key in values:
        if not isinstance(key, str):
            raise ValueError(
                f"{section} has the key {key!r} ({type(key).__name__}); its keys are setting "
                f"names such as {section}.{next(iter(hints))}"
            )
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


def check_copy(copy: object, coverage: object, src_vocab_size: int, tgt_vocab_size: int) -> None:
    """Refuse ``copy``/``coverage`` values that are not booleans, coverage without copying, and
    copying between two vocabularies (a copied source id must mean the same target word)."""
    for name, value in (("copy", copy), ("coverage", coverage)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    if coverage and not copy:
        raise ValueError("coverage=True needs copy=True (coverage acts on the copy attention)")
    if copy and src_vocab_size != tgt_vocab_size:
        raise ValueError(
            "copy=True needs one vocabulary for source and target, got src_vocab_size="
            f"{src_vocab_size} and tgt_vocab_size={tgt_vocab_size}"
        )

"""Run configurations: a YAML file with ``data``, ``model``, ``train`` and ``decode`` sections.

Each section becomes a small typed config; unknown keys and bad values are errors that name the
key. ``--set section.key=value`` overrides are parsed as YAML scalars (``train.max_minutes=5``,
``model.attention=luong``, ``data.options.max_words=30``).

    name: transformer-en-fr
    out_dir: runs/transformer-en-fr
    data:   {corpus: bible, options: {source: "4", target: l, max_words: 30}, vocab_size: 8000}
    model:  {family: transformer, d_model: 256, num_heads: 4, ...}
    train:  {max_minutes: 10, batch_tokens: 4096, lr: 7e-4, warmup_steps: 1000, ...}
    decode: {beam_size: 4, length_penalty: 0.6}
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from qkv.config_values import check_values
from qkv.data.errors import decode_utf8
from qkv.models.registry import check_model_values
from qkv.tasks.registry import task as task_spec
from qkv.tasks.spec import TaskSpec
from qkv.training.config import TrainConfig

S = TypeVar("S")


# The widest beam: far beyond any useful one (4 to 12 are usual), and each hypothesis holds
# its own decoder state (a beam of 10**8 asked for 358 GB).


def _default_section(name: str) -> Any:
    """The default ``name`` section of a run that names no task (the default task's)."""
    return task_spec(DEFAULT_TASK).sections[name]()


# The task of a run configuration without a ``task:`` key.
DEFAULT_TASK = "translation"


@dataclass(frozen=True)
class RunConfig:
    """A run: its model section (flat, checked against ``family``) and the typed ``data``,
    ``train`` and ``decode`` sections of its ``task`` (the task's
    :attr:`~qkv.tasks.spec.TaskSpec.sections`, each defined in the task's folder, for example
    :mod:`qkv.tasks.translation.config`). Read a section typed with :meth:`section`."""

    name: str
    out_dir: str
    family: str
    model: dict[str, Any]
    data: Any = field(default_factory=lambda: _default_section("data"))
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: Any = field(default_factory=lambda: _default_section("decode"))
    task: str = DEFAULT_TASK

    def section(self, name: Literal["data", "train", "decode"], cls: type[S]) -> S:
        """The ``name`` section as the ``cls`` its task reads (``config.section("data",
        LMDataConfig)``): typed for the caller, and an error naming both classes when the run is
        another task's."""
        value = getattr(self, name)
        if not isinstance(value, cls):
            raise TypeError(
                f"the {name} section of this {self.task} run is a {type(value).__name__}, "
                f"not a {cls.__name__}"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "name": self.name,
            "out_dir": self.out_dir,
            "model": {"family": self.family, **self.model},
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
            "decode": dataclasses.asdict(self.decode),
        }


def _mapping(name: str, values: Any, example: str = "") -> dict[Any, Any]:
    """The section ``name`` (``None``: empty), which must be a mapping."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(
            f"section {name!r} must be a mapping of {name}.KEY: value{example}, got "
            f"{values!r:.60} ({type(values).__name__})"
        )
    return values


def _section(name: str, cls: type, values: Any) -> Any:
    values = _mapping(name, values)
    check_values(cls, values, name)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(_with_suggestion(name, k, known) for k in unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"section {name!r}: {error}") from None


def _with_suggestion(section: str, key: str, known: set[str]) -> str:
    """``train.lr_rate (did you mean train.lr?)`` when a known key is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    close = close or [k for k in sorted(known) if key.startswith(k + "_") or k.startswith(key)][:1]
    return f"{section}.{key}" + (f" (did you mean {section}.{close[0]}?)" if close else "")


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (values parsed as YAML) to a nested dict, in place."""
    import yaml

    for item in overrides:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ValueError(f"--set key {key!r} is not a dotted name such as train.max_minutes")
        node = raw
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {key}: {part!r} is not a section")
        node[parts[-1]] = yaml.safe_load(text)
    return raw


def run_config_from_dict(raw: dict[str, Any], *, default_name: str = "run") -> RunConfig:
    """The run configuration of a parsed YAML (or saved JSON) mapping; every section, key and
    value is checked, and an error names the key and the value."""
    allowed = {"name", "out_dir", "model", "data", "train", "decode", "task"}
    odd = [key for key in raw if not isinstance(key, str)]
    if odd:
        raise ValueError(
            f"top-level key {odd[0]!r} ({type(odd[0]).__name__}) is not a name; the keys are "
            f"{', '.join(sorted(allowed))}"
        )
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(f"unknown top-level key(s) {', '.join(unknown)}; known: {sorted(allowed)}")
    spec = task_spec(raw.get("task", DEFAULT_TASK))
    for key in ("name", "out_dir"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ValueError(f"{key} must be a non-empty string, got {raw[key]!r}")
    family, model = _model_section(raw.get("model"), spec)
    name = raw.get("name", default_name)
    sections = {key: _section(key, cls, raw.get(key)) for key, cls in spec.sections.items()}
    return RunConfig(
        name=name,
        out_dir=raw.get("out_dir", f"runs/{name}"),
        family=family,
        model=model,
        task=spec.name,
        **sections,
    )


def move_saved_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """A saved run's configuration (``config.json``) with the ``model:`` keys its task has moved
    to another section (:attr:`~qkv.tasks.spec.TaskSpec.moved_model_keys`) in their new
    place; runs saved before the move load as they trained."""
    spec = task_spec(raw.get("task", DEFAULT_TASK))
    model = raw.get("model")
    moved = spec.moved_model_keys
    if not isinstance(model, dict) or not set(model) & set(moved):
        return raw
    raw = {**raw, "model": {k: v for k, v in model.items() if k not in moved}}
    for key, place in moved.items():
        if key in model:
            section, name = place.split(".")
            raw[section] = {**(raw.get(section) or {}), name: model[key]}
    return raw


def _check_task_settings(values: Any, spec: TaskSpec) -> None:
    """Refuse a ``train:`` setting of the task's that this task does not read: ``batch_tokens``
    given at all, ``label_smoothing`` other than 0 (what a loss without smoothing does). Checked
    where a person writes the configuration (the YAML file and its ``--set``); a saved
    ``config.json`` holds every key at its default."""
    if not isinstance(values, dict):
        return  # _section names the error
    unread = {
        "batch_tokens": ("batch_tokens" in values, "; the batch size is data.batch_size"),
        "label_smoothing": (values.get("label_smoothing", 0) != 0, "; its loss has no smoothing"),
    }
    for key, (refused, hint) in unread.items():
        if refused and key not in spec.train_settings:
            raise ValueError(
                f"train.{key}: {spec.plural} do not read it (got {values[key]!r}){hint}"
            )


def _model_section(values: Any, spec: TaskSpec) -> tuple[str, dict[str, Any]]:
    """The family and the other keys of the ``model`` section: a family that the task trains,
    every key one its config or the task reads (a typo is an error naming the key, before any
    data is loaded), each value of the type asked for (sizes and ranges are checked when the
    config is built, once the data has decided the vocabulary)."""
    families = " or ".join(spec.families)
    values = _mapping("model", values, f" (model.family: {families}, sizes...)")
    family = values.get("family")
    if family is None:
        raise ValueError(f"model.family is required ({families})")
    if not isinstance(family, str) or family not in spec.families:
        raise ValueError(f"model.family of a {spec.name} run must be {families}, got {family!r}")
    model = {key: value for key, value in values.items() if key != "family"}
    moved = sorted(set(model) & set(spec.moved_model_keys))
    if moved:
        raise ValueError(
            f"model.{moved[0]} is now {spec.moved_model_keys[moved[0]]} (a weight of the loss, "
            "not of the model)"
        )
    check_model_values(family, model, extra=spec.model_keys)
    return family, model


def load_run_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run configuration and apply ``--set`` overrides."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no configuration file {path}")
    text = decode_utf8(path, path.read_bytes())
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping at the top level")
    raw = apply_overrides(raw, overrides or [])
    config = run_config_from_dict(raw, default_name=path.stem)
    _check_task_settings(raw.get("train"), task_spec(config.task))
    return config

"""The site's generated reference pages, as Markdown: the configuration reference (every key of
every section of every task and model family: its type, default and allowed values), the CLI
reference (every command of ``qkv``'s parser) and the API pages' ``::: module`` stubs.

``tools/gen_site_pages.py`` writes them into the site when ``mkdocs build`` runs
(mkdocs-gen-files), so that they are read from the code each time and cannot drift from it.

Allowed values come from three places, never from a guess:

* a field's metadata: ``ranged(default, ">= 1")`` and ``choice(default, TABLE)``
  (:mod:`qkv.config_values`), which ``tests/docs/test_config_ranges.py`` checks against the real
  ``__post_init__`` at the bound and just past it;
* the range checks a config's ``__post_init__`` runs, recorded while a valid config is built
  (:func:`qkv.config_values.recorded_checks`: ``check_positive_ints``, ``check_fractions``,
  ``check_choice``...), so the words are the check's own;
* ``Literal[...]`` annotations.

A key none of these covers gets no stated range.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import pkgutil
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from qkv.config_values import describe, recorded_checks

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("data", "model", "train", "decode")
# A stand-in for the sizes a task fills in from its data (vocabularies, label counts), so that
# a family's config can be built and its checks recorded.
_SIZE = 64

# The API reference: one page per package, every public module under it.
API_PACKAGES = ("attention", "layers", "models", "decoding", "training", "evaluation", "viz")
API_MODULES = {"tasks-spec": ("qkv.tasks.spec", "qkv.tasks.seen"), "io": ("qkv.io",)}


def _cell(text: str) -> str:
    """``text`` fit for a Markdown table cell, shown as written (no links, tags or emphasis)."""
    for char in "\\`*_[]>|":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace("\n", " ").strip()


def _code(text: str) -> str:
    """``text`` as code in a Markdown table cell."""
    return "`" + text.replace("|", "\\|").replace("\n", " ") + "`"


def _default_text(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if isinstance(value, tuple):
        value = list(value)
    return _code(json.dumps(value))


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _allowed(f: dataclasses.Field | None, hint: Any, recorded: Mapping[str, str]) -> str:
    """What the field accepts beyond its type, from its metadata, a recorded check or a
    ``Literal``; empty when none states it."""
    if f is not None and "range" in f.metadata:
        return str(f.metadata["range"])
    if f is not None and "choices" in f.metadata:
        return "one of " + ", ".join(f.metadata["choices"])
    literals = [a for a in typing.get_args(hint) if typing.get_origin(a) is typing.Literal]
    if typing.get_origin(hint) is typing.Literal:
        literals = [hint]
    if literals:
        return "one of " + ", ".join(str(v) for lit in literals for v in typing.get_args(lit))
    name = f.name if f is not None else ""
    return recorded.get(name, "")


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if doc.startswith(f"{cls.__name__}("):  # the dataclass's own signature, not a docstring
        return ""
    return doc.split("\n\n", 1)[0].replace("\n", " ")


def section_classes() -> dict[str, dict[type, list[str]]]:
    """Per section (``data``, ``train``, ``decode``), each config class and the tasks using it,
    in registry order."""
    from qkv.tasks.registry import tasks

    found: dict[str, dict[type, list[str]]] = {name: {} for name in SECTIONS if name != "model"}
    for spec in tasks():
        for section, cls in spec.sections.items():
            found[section].setdefault(cls, []).append(spec.name)
    return found


def _recorded_defaults(cls: type) -> dict[str, str]:
    """The range checks ``cls()`` runs, recorded (empty when the defaults do not build)."""
    with recorded_checks() as recorded:
        try:
            cls()
        except (TypeError, ValueError):
            return {}
    return dict(recorded)


def family_keys(family: str) -> list[tuple[str, Any, Any, dataclasses.Field | None]]:
    """Each flat key of ``family``'s model section: its name, annotation, default and field."""
    from qkv.models.registry import FAMILIES, model_fields
    from qkv.models.sequence_encoder import NESTED, TextEncoderConfig

    cls = FAMILIES[family][0]
    fields = {f.name: f for f in dataclasses.fields(TextEncoderConfig)}
    if hasattr(cls, "flat_fields"):
        fields.update({f.name: f for f in dataclasses.fields(cls) if f.name not in NESTED})
    else:
        fields = {f.name: f for f in dataclasses.fields(cls)}
    return [
        (key, hint, _field_default(fields[key]), fields[key])
        for key, hint in model_fields(family).items()
    ]


def _recorded_family(family: str) -> dict[str, str]:
    """The range checks a valid ``family`` config runs (its sizes set to a stand-in)."""
    from qkv.models.registry import build_config

    values = {
        key: _SIZE
        for key, hint, default, _ in family_keys(family)
        if default is dataclasses.MISSING and hint is int
    }
    with recorded_checks() as recorded:
        try:
            build_config(family, values)
        except (TypeError, ValueError):
            return {}
    return dict(recorded)


def _table(rows: list[tuple[str, Any, Any, dataclasses.Field | None]], recorded: dict) -> str:
    lines = ["| key | type | default | allowed |", "|---|---|---|---|"]
    for name, hint, default, f in rows:
        allowed = _allowed(f, hint, recorded)
        lines.append(
            f"| `{name}` | {_cell(describe(hint))} | {_default_text(default)} | {_cell(allowed)} |"
        )
    return "\n".join(lines)


def class_rows(cls: type) -> list[tuple[str, Any, Any, dataclasses.Field | None]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], _field_default(f), f) for f in dataclasses.fields(cls)]


def _anchor(*parts: str) -> str:
    return "-".join(parts).replace("_", "-").lower()


def configuration_page() -> str:
    """The configuration reference, as Markdown."""
    from qkv.models.registry import FAMILIES
    from qkv.tasks.registry import tasks

    sections = section_classes()
    out = [
        "# Configuration reference",
        "",
        "A run configuration is a YAML file with `task`, `name`, `out_dir` and four sections: "
        "`data`, `model` (its `family` picks the keys), `train` and `decode`. This page is "
        "generated from the config dataclasses when the site is built (`tools/site_reference.py`"
        "), so it lists what the code reads. *allowed* is what a key's check accepts beyond its "
        "type, where the code states it; other keys may limit each other as well (`d_model` a "
        "multiple of `num_heads`, `coverage` only with `copy`), which the error names. A key "
        "with no *allowed* entry has no range stated here.",
        "",
        "## Tasks",
        "",
        "| task | data | model families | train | decode |",
        "|---|---|---|---|---|",
    ]
    for spec in tasks():
        cells = []
        for section in ("data", "train", "decode"):
            cls = spec.sections[section]
            cells.append(f"[{cls.__name__}](#{_anchor(section, cls.__name__)})")
        families = ", ".join(f"[{f}](#{_anchor('model', f)})" for f in spec.families)
        extra = sorted(spec.model_keys)
        if extra:
            families += " (also " + ", ".join(f"`{k}`" for k in extra) + ")"
        out.append(f"| `{spec.name}` | {cells[0]} | {families} | {cells[1]} | {cells[2]} |")
    for section in SECTIONS:
        out += ["", f"## {section}", ""]
        if section == "model":
            for family in FAMILIES:
                cls = FAMILIES[family][0]
                users = [s.name for s in tasks() if family in s.families]
                out += [
                    f"### {family} {{#{_anchor('model', family)}}}",
                    "",
                    f"`family: {family}` ({cls.__name__}; tasks: "
                    + ", ".join(f"`{u}`" for u in users)
                    + f"). {_summary(cls)}",
                    "",
                    _table(family_keys(family), _recorded_family(family)),
                ]
            continue
        for cls, users in sections[section].items():
            out += [
                f"### {cls.__name__} {{#{_anchor(section, cls.__name__)}}}",
                "",
                f"Tasks: {', '.join(f'`{u}`' for u in users)}. {_summary(cls)}",
                "",
                _table(class_rows(cls), _recorded_defaults(cls)),
            ]
    return "\n".join(out) + "\n"


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command under ``parser`` (nested ones too), with its full name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def _arguments(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    lines = ["| argument | help | default |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        names = ", ".join(action.option_strings) or (action.metavar or action.dest)
        if action.option_strings and action.nargs != 0:
            names += f" {formatter._format_args(action, action.dest.upper())}"
        help_text = formatter._expand_help(action) if action.help else ""
        default = action.default
        hidden = default in (None, False, argparse.SUPPRESS) or not action.option_strings
        shown = "" if hidden else _code(str(default))
        lines.append(f"| {_code(str(names))} | {_cell(help_text)} | {shown} |")
    return "\n".join(lines)


def cli_page() -> str:
    """The CLI reference, as Markdown, from :func:`qkv.cli.main.build_parser`."""
    from qkv.cli.main import build_parser

    parser = build_parser()
    out = [
        "# CLI reference",
        "",
        "Every command of `qkv` with its arguments and help, generated from the parser "
        "(`qkv.cli.main.build_parser`) when the site is built. `qkv COMMAND --help` prints "
        "the same.",
    ]
    for name, sub in _commands(parser, "qkv"):
        usage = sub.format_usage().strip().removeprefix("usage: ")
        out += ["", f"## {name}", "", _cell(sub.description or ""), ""]
        out += ["```text", usage, "```", "", _arguments(sub)]
    return "\n".join(out) + "\n"


def _package_modules(package: str) -> list[str]:
    """The public modules under ``qkv.<package>`` (found on disk, so a new module gets its
    section), sorted."""
    src = ROOT / "src" / "qkv"
    return sorted(
        info.name
        for info in pkgutil.walk_packages([str(src / package)], f"qkv.{package}.")
        if not any(part.startswith("_") for part in info.name.split("."))
    )


def api_modules() -> list[str]:
    """Every module the API pages show (``tools/griffe_roles.py`` links a docstring's
    reference to a name in one of them, and shows any other of qkv's names as code)."""
    found = ["qkv"]
    for package in API_PACKAGES:
        found += [f"qkv.{package}", *_package_modules(package)]
    for modules in API_MODULES.values():
        found += modules
    return found


def api_pages() -> dict[str, str]:
    """The API reference's pages (``name.md`` -> Markdown): one per package, a ``:::`` block
    per public module."""
    pages = {
        "index.md": "# The public face\n\n"
        "`import qkv` gives `qkv.train`, `qkv.load`, `qkv.show_attention` and the attention "
        "core's main names, each imported on first use.\n\n"
        "::: qkv\n    options:\n      show_submodules: false\n"
    }
    for package in API_PACKAGES:
        body = [f"# qkv.{package}", "", f"::: qkv.{package}", "    options:",
                "      members: false", ""]  # fmt: skip
        for module in _package_modules(package):
            body += [f"::: {module}", ""]
        pages[f"{package}.md"] = "\n".join(body)
    for page, modules in API_MODULES.items():
        blocks = "".join(f"::: {module}\n\n" for module in modules)
        pages[f"{page}.md"] = f"# {' and '.join(modules)}\n\n{blocks}"
    return pages

"""The YAML run configurations shipped inside the package (``qkv/configs/``), found by name.

In the checkout ``qkv train demo`` and ``qkv train configs/demo.yaml`` start the same run: a path
to an existing file is used as it is, anything else is a preset name such as ``demo`` or
``reading/cloze-as-reader`` (the ``.yaml`` suffix optional), read from the installed package, so
a wheel works outside the repository. (Not to be confused with :mod:`qkv.models.presets`, the
named sizes of a model section.)

Files are found through :mod:`importlib.resources`, so an installed copy needs no checkout; the
package must be unpacked on disk (it always is when pip installs a wheel), since the trainer
reads a path.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["Preset", "config_names", "config_path", "presets"]

_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Preset:
    """A packaged run configuration: its name, its file and its one-line description."""

    name: str
    path: Path
    description: str


def _root() -> Traversable:
    return files("qkv") / "configs"


def _walk(folder: Traversable, prefix: str = "") -> dict[str, Traversable]:
    found: dict[str, Traversable] = {}
    for entry in folder.iterdir():
        if entry.is_dir():
            found.update(_walk(entry, f"{prefix}{entry.name}/"))
        elif entry.name.endswith(".yaml"):
            found[prefix + entry.name.removesuffix(".yaml")] = entry
    return found


def _packaged() -> dict[str, Traversable]:
    root = _root()
    if not root.is_dir():  # a wheel built without its package data
        raise ValueError(f"qkv's packaged configurations are missing ({root}): reinstall qkv")
    return _walk(root)


def config_names() -> list[str]:
    """Every packaged configuration's name (``demo``, ``tiny/reverse-transformer``...), sorted."""
    return sorted(_packaged())


def _strip_suffix(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def _looks_like_path(text: str) -> bool:
    """``runs/x.yaml``, ``/tmp/a.yml``, ``./mine.yaml``: a file the user means, never a name."""
    return ("/" in text and text.endswith(_SUFFIXES)) or text.startswith(("/", "./", "../", "~"))


def _as_path(resource: Traversable) -> Path:
    path = Path(str(resource))
    if not path.is_file():  # a zipped install: the trainer needs a real file
        raise ValueError(f"the packaged configuration {resource} is not a file on disk")
    return path


def config_path(name_or_path: str) -> Path:
    """The file of a run configuration: ``name_or_path`` itself when it is an existing file,
    otherwise the packaged configuration of that name (``demo``, ``reading/cloze-as-reader``,
    with or without ``.yaml``).

    Raises ``FileNotFoundError`` for a path (``dir/x.yaml``, ``./x``) that does not exist and is
    not exactly a packaged name (``configs/demo.yaml`` outside the checkout is refused, with a
    hint, never quietly read from the package), and ``ValueError`` for an unknown name, naming
    the closest packaged names.
    """
    given = Path(name_or_path).expanduser()
    if given.is_file():
        return given
    packaged = _packaged()
    name = _strip_suffix(name_or_path)
    if name in packaged:  # `reading/cloze-as-reader.yaml` is that name, whatever it looks like
        return _as_path(packaged[name])
    if _looks_like_path(name_or_path):
        hint = ""
        bare = name.removeprefix("configs/")  # an old repository path, run outside the checkout
        if bare in packaged:
            hint = f" (the packaged configuration of that name is `{bare}`)"
        raise FileNotFoundError(f"no configuration file {name_or_path}{hint}")
    close = difflib.get_close_matches(name, packaged, n=3, cutoff=0.5)
    suggestion = f"; the closest: {', '.join(close)}" if close else ""
    raise ValueError(
        f"no configuration file or packaged configuration named {name_or_path!r}{suggestion} "
        "(`qkv configs` lists them all)"
    )


def _description(text: str) -> str:
    """The first comment line of a YAML file, without its ``#``."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
        if stripped:
            break
    return ""


def presets() -> list[Preset]:
    """Every packaged configuration with its description (the first comment line), by name."""
    return [
        Preset(name, _as_path(resource), _description(resource.read_text(encoding="utf-8")))
        for name, resource in sorted(_packaged().items())
    ]

"""A griffe extension (mkdocs.yml, the python handler's ``extensions``): the Sphinx roles in qkv's
docstrings (``:class:`~qkv.tasks.seen.Seen```, ``:meth:`load```, ``:mod:`qkv.attention```...)
rewritten as mkdocstrings cross-references, so that the API pages show links, not the roles'
markup, and a reference to a name that does not exist fails the strict build.

* ``:role:`~a.b.C``` becomes ``[`C`][a.b.C]`` (a tilde shows the last component only) and
  ``:role:`a.b.C``` becomes ``[`a.b.C`][a.b.C]`` and ``:role:`title <a.b.C>``` becomes
  ``[`title`][a.b.C]``; the title is code, as Sphinx shows a role.
* A name is looked up the way Sphinx's Python domain does: in the current class (and the classes
  around it), then in the current module, whose members include the names it imports, then as a
  full dotted name; a name with a leading dot (``:class:`.Translator```), failing those, as the
  one object in the package whose path ends with it. The target is where the name is defined
  (an imported name's own module), the path its page uses.
* A name outside qkv (``:class:`torch.Tensor```, ``:mod:`zipfile```: a module the site cannot
  link to offline) becomes plain code. So does a name of qkv's that no API page shows: one
  outside the modules that ``linked`` lists (``site_reference.api_modules``), or one with no
  docstring (mkdocstrings leaves it off the page), a private one excepted.
* A name found nowhere is logged as a warning with its file and line (strict mode fails on it)
  and left as a reference, which autorefs reports again if the docstring is on a page.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from griffe import (
    Alias,
    AliasResolutionError,
    CyclicAliasError,
    Extension,
    GriffeLoader,
    Module,
    Object,
    logger,
)

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|data|const|exc|obj|mod):`"
    r"(?:(?P<title>[^`<]+?) <(?P<target>\.?[\w.]+)>|(?P<tilde>~?)(?P<name>\.?[\w.]+))`"
)


def _member(obj: Object | Alias, name: str) -> Object | Alias | None:
    """``obj``'s member ``name``, inherited members of a class included."""
    members = obj.all_members if obj.is_class else obj.members
    return members.get(name)


def _walk(obj: Object | Alias, parts: list[str]) -> tuple[str, Object | None] | None:
    """Follow ``parts`` from ``obj`` through members and imports: the path found and its
    object (None when the path leaves the loaded packages), or None when a part is missing."""
    for i, part in enumerate(parts):
        member = _member(obj, part)
        if member is None:
            return None
        if member.is_alias:
            try:
                member = member.final_target
            except (AliasResolutionError, CyclicAliasError):  # an import from outside
                return ".".join([member.target_path, *parts[i + 1 :]]), None
        obj = member
    return obj.path, obj  # type: ignore[return-value]


def _scopes(obj: Object) -> list[Object]:
    """Where a relative name is looked up: the enclosing classes, innermost first (the object
    itself when it is a class), then its module."""
    scopes: list[Object] = []
    current: Object | None = obj
    while current is not None and not current.is_module:
        if current.is_class:
            scopes.append(current)
        current = current.parent
    return [*scopes, obj.module]


class SphinxRoles(Extension):
    """Rewrites the roles of every docstring of a package once griffe has loaded it.

    Parameters:
        linked: the modules whose names get links; any other of the loaded packages' names is
            shown as code. ``None`` links every name found.
    """

    def __init__(self, linked: Iterable[str] | None = None) -> None:
        super().__init__()
        self.linked = None if linked is None else frozenset(linked)

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        self._loaded = loader.modules_collection
        self._by_name: dict[str, list[Object]] = {}
        self._index(pkg)
        self._rewrite(pkg)

    def _index(self, obj: Object) -> None:
        """Every object of the package by its last name, for ``.name`` lookups."""
        self._by_name.setdefault(obj.name, []).append(obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._index(member)  # type: ignore[arg-type]

    def _rewrite(self, obj: Object) -> None:
        if obj.docstring is not None:
            doc = obj.docstring
            doc.value = ROLE.sub(lambda match: self._replace(match, obj), doc.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member)  # type: ignore[arg-type]

    def resolve(self, name: str, role: str, scope: Object) -> tuple[str, Object | None] | None:
        """Where ``name`` (a role's target, written in ``scope``'s docstring) points: its path
        and object (None outside the loaded packages), or None when it names nothing."""
        if name.startswith("."):  # Sphinx's fuzzy form: the scopes, then any unique suffix
            found = self.resolve(name[1:], role, scope)
            return found if found is not None else self._suffix(name)
        parts = name.split(".")
        for place in _scopes(scope):
            found = _walk(place, parts)
            if found is not None:
                return found
        top = self._loaded.members.get(parts[0])
        if top is not None:
            return _walk(top, parts[1:]) if len(parts) > 1 else (top.path, top)
        # Only a dotted name or a module is taken for an outside name: a bare ``:meth:`copy```
        # that the scopes lack is a mistake, not the standard library's copy module.
        outside = (len(parts) > 1 or role == "mod") and importlib.util.find_spec(parts[0])
        return (name, None) if outside else None

    def _suffix(self, name: str) -> tuple[str, Object | None] | None:
        """What ``name`` (``.Class.method``) names from the one object of the package called
        ``Class`` that has it."""
        first, *rest = name.lstrip(".").split(".")
        found = {f for o in self._by_name.get(first, []) if (f := _walk(o, rest)) is not None}
        return found.pop() if len(found) == 1 else None

    def _replace(self, match: re.Match[str], scope: Object) -> str:
        name = match["name"] or match["target"]
        written = name.lstrip(".")
        shown = match["title"] or (written.rsplit(".", 1)[-1] if match["tilde"] else written)
        found = self.resolve(name, match["role"], scope)
        if found is None:
            line = (scope.docstring.lineno or 0) + match.string.count("\n", 0, match.start())
            logger.warning(
                "%s:%d: %s names nothing in %s, its module or their imports",
                scope.relative_filepath,
                line,
                match[0],
                scope.path,
            )
            return f"[`{shown}`][{written}]"
        path, target = found
        return f"[`{shown}`][{path}]" if self._shown(path, target) else f"`{shown}`"

    def _shown(self, path: str, target: Object | None) -> bool:
        """Whether ``target`` has a heading to link to: one of the loaded packages' names, in
        a linked module, documented (mkdocstrings leaves an undocumented name off the page). A
        private name (never on a page) counts as shown, so that autorefs reports the reference
        as the mistake it is."""
        if target is None:
            return False
        if any(part.startswith("_") for part in path.split(".")):
            return True
        linked = self.linked is None or target.module.path in self.linked
        return linked and target.has_docstrings


class SiteRoles(SphinxRoles):
    """:class:`SphinxRoles` for qkv's site (mkdocs.yml names it): links to the modules that
    ``site_reference.api_modules`` puts on the API pages."""

    def __init__(self) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from site_reference import api_modules

        super().__init__(linked=api_modules())

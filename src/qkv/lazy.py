"""Package faces that import each name on first use (PEP 562), so that importing a package, or
any module inside it, does not import everything the package exports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``exports`` (name -> the module that
    defines it); ``namespace`` is the package's ``globals()``, where a name is kept once
    imported.

        __getattr__, __dir__ = lazy_exports(globals(), {"Transformer": "qkv.models.transformer"})
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__

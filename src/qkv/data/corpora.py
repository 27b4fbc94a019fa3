"""One registry of corpora by name, used by every kind of data: ``REGISTRY.load(name, **options)``.

Each kind keeps its loaders in a :class:`CorpusRegistry` (parallel and summarisation pairs,
language-model text, sentiment, tagged and entity-tagged sentences, image data sets, span
corpora). A registry is a read-only mapping ``name -> loader`` in the order it was written, and
checks a call once, the same way for every kind, before the loader runs:

- an unknown name is refused, listing the known names;
- an option the loader does not take is refused, naming it and the loader's options (read
  from its signature);
- a required option left out (a parameter without a default, less the registry's own defaults
  for that corpus) is refused, naming it.

Each refusal is a :class:`~qkv.data.errors.DataError`. A loader takes its options by name: a
loader with ``*args``, ``**kwargs`` or positional-only parameters cannot be registered, since its
options could not be checked.

```python
TEXTS = CorpusRegistry("text corpus", {"shakespeare": load_shakespeare, "text": load_text})
TEXTS.load("text", path="notes.txt")  # load_text(path="notes.txt")
TEXTS.load("text")  # DataError: text corpus 'text' needs option(s) ['path']
```
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from qkv.data.errors import DataError

__all__ = ["MISSING_OPTIONS", "UNKNOWN_NAME", "UNKNOWN_OPTIONS", "CorpusRegistry"]

T = TypeVar("T")

UNKNOWN_NAME = "unknown {kind} {name!r}; known: {known}"
"""How an unknown corpus name is refused (``known``: the registered names)."""
UNKNOWN_OPTIONS = "{kind} {name!r} got unknown option(s) {unknown}; its options: {accepted}"
"""How an unknown option is refused (``accepted``: the loader's options, or ``none``)."""
MISSING_OPTIONS = "{kind} {name!r} needs option(s) {missing}"
"""How a required option left out is refused."""

_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class CorpusRegistry(Mapping[str, Callable[..., T]], Generic[T]):
    """Corpus name -> loader for one kind of data, with the options of each call checked.

    Args:
        kind: what one corpus is called in messages (``"text corpus"``, ``"image data set"``).
        loaders: name -> loader, in the order the names are listed.
        defaults: name -> options the registry passes unless the caller gives them.
        unknown_options / missing_options / unknown_name: the wording of the refusals,
            formatted with ``kind``, ``name``, ``unknown`` / ``missing`` (lists), ``accepted``
            and ``known`` (strings).
    """

    def __init__(
        self,
        kind: str,
        loaders: Mapping[str, Callable[..., T]],
        *,
        defaults: Mapping[str, Mapping[str, Any]] | None = None,
        unknown_options: str = UNKNOWN_OPTIONS,
        missing_options: str = MISSING_OPTIONS,
        unknown_name: str = UNKNOWN_NAME,
    ) -> None:
        self.kind = kind
        self._loaders = dict(loaders)
        self._parameters = {name: _named_parameters(kind, name, f) for name, f in loaders.items()}
        self._defaults = {name: dict(options) for name, options in (defaults or {}).items()}
        self._unknown_options = unknown_options
        self._missing_options = missing_options
        self._unknown_name = unknown_name
        for name, options in self._defaults.items():
            if name not in self._loaders:
                raise ValueError(f"defaults for {kind} {name!r}, which is not registered")
            odd = sorted(set(options) - set(self._parameters[name]))
            if odd:
                raise ValueError(f"defaults {odd} for {kind} {name!r}, whose loader lacks them")

    def __getitem__(self, name: str) -> Callable[..., T]:
        return self._loaders[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __repr__(self) -> str:
        return f"CorpusRegistry({self.kind!r}, {list(self._loaders)})"

    def options(self, name: str) -> list[str]:
        """The option names that ``load(name, ...)`` accepts, in the loader's order."""
        self._check_name(name)
        return list(self._parameters[name])

    def load(self, name: str, **options: Any) -> T:
        """``loader(**defaults, **options)`` for the corpus ``name``, once the options are checked.

        Raises:
            DataError: an unknown name (the known ones listed), an unknown option (the accepted
                ones listed) or a required option left out; or what the loader raises.
        """
        self._check_name(name)
        parameters = self._parameters[name]
        unknown = sorted(set(options) - set(parameters))
        if unknown:
            accepted = ", ".join(parameters) or "none"
            raise DataError(
                self._unknown_options.format(
                    kind=self.kind, name=name, unknown=unknown, accepted=accepted
                )
            )
        options = {**self._defaults.get(name, {}), **options}
        missing = [p for p, required in parameters.items() if required and p not in options]
        if missing:
            raise DataError(
                self._missing_options.format(kind=self.kind, name=name, missing=missing)
            )
        return self._loaders[name](**options)

    def _check_name(self, name: str) -> None:
        if name not in self._loaders:
            known = ", ".join(self._loaders)
            raise DataError(self._unknown_name.format(kind=self.kind, name=name, known=known))


def _named_parameters(kind: str, name: str, loader: Callable[..., Any]) -> dict[str, bool]:
    """``{parameter: required}`` of ``loader``, whose parameters must all be passable by name."""
    parameters = inspect.signature(loader).parameters
    odd = [p for p, spec in parameters.items() if spec.kind not in _BY_NAME]
    if odd:
        raise TypeError(
            f"the loader of {kind} {name!r} has parameters {odd} that cannot be passed by name "
            "(*args, **kwargs or positional-only); its options could not be checked"
        )
    return {p: spec.default is inspect.Parameter.empty for p, spec in parameters.items()}

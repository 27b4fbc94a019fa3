"""The task registry: one row per task, naming the module of its spec
(``qkv/tasks/<task>/task.py``).

Each holds a ``TASK`` :class:`~qkv.tasks.spec.TaskSpec` (its configuration sections, model
families, where its training function and runner are, and the options it takes). Spec modules
are imported on first use and import only the task's sections, so a command pays only for the
task it runs, and reading a YAML file pays for none of its training code. ``qkv train``,
``evaluate``, ``plot-attention``, ``serve`` and ``explore`` ask this registry and nothing else;
adding a task is one folder and one row here (docs/development/adding-a-task.md).
"""

from __future__ import annotations

import functools
import importlib

from qkv.tasks.spec import TaskSpec

# The task of a run configuration's `task:` key, and the module that defines it.
TASKS: dict[str, str] = {
    "translation": "qkv.tasks.translation.task",
    "language_model": "qkv.tasks.language_model.task",
    "classification": "qkv.tasks.classification.task",
    "tagging": "qkv.tasks.tagging.task",
    "ner": "qkv.tasks.ner.task",
    "reading": "qkv.tasks.reading.task",
    "image_classification": "qkv.tasks.image_classification.task",
    "captioning": "qkv.tasks.captioning.task",
    "summarisation": "qkv.tasks.summarisation.task",
    "dialogue": "qkv.tasks.dialogue.task",
}


def task(name: str) -> TaskSpec:
    """The spec of task ``name``; an unknown name is an error listing the known ones. Each spec
    is looked up (its module imported and checked) once per process and kept."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {name!r}")
    return _spec(name, TASKS[name])


@functools.cache
def _spec(name: str, module: str) -> TaskSpec:
    spec = importlib.import_module(module).TASK
    if not isinstance(spec, TaskSpec) or spec.name != name:
        raise TypeError(f"{module}.TASK is not the TaskSpec of {name!r}")
    return spec


def tasks() -> list[TaskSpec]:
    """Every registered task, in registry order."""
    return [task(name) for name in TASKS]

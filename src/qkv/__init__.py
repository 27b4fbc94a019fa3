"""qkv: attention mechanisms and the models built on them.

The public face, each name imported on first use so that ``import qkv`` stays fast::

    import qkv

    model_dir = qkv.train("tiny/reverse-transformer", train__max_steps=200, out_dir="runs/rev")
    translator = qkv.load(model_dir)             # the task's runner: a Translator here
    translator.translate(["a b c"])[0].text

    out = qkv.attend(q, k, v, keep=qkv.padding_mask(lengths, k.shape[-2]))

``qkv.train`` and ``qkv.load`` work for every registered task (:mod:`qkv.tasks.registry`); the
attention core's main names (:mod:`qkv.attention`) are here too. In a notebook, what a runner's
``views`` returns displays itself inline, and ``qkv.show_attention(weights, tokens)`` shows any
model's attention weights the same way (:mod:`qkv.tasks.raw_attention`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qkv.lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers and editors only
    from qkv.attention import (  # noqa: F401
        Additive,
        AttentionOutput,
        Dot,
        General,
        Location,
        MultiHeadAttention,
        ScaledDot,
        attend,
        causal_mask,
        combine_masks,
        from_key_padding,
        padding_mask,
    )
    from qkv.tasks.raw_attention import show_attention

__version__ = "0.1.0"

# The attention core's names at the top level, each from qkv.attention when first asked for.
_ATTENTION = (
    "Additive",
    "AttentionOutput",
    "Dot",
    "General",
    "Location",
    "MultiHeadAttention",
    "ScaledDot",
    "attend",
    "causal_mask",
    "combine_masks",
    "from_key_padding",
    "padding_mask",
)

__all__ = ["__version__", "load", "show_attention", "train", *_ATTENTION]


def load(model_dir: str | Path, **options: Any) -> Any:
    """The trained model in ``model_dir`` as its task's runner: a
    :class:`~qkv.tasks.translation.runner.Translator`, a
    :class:`~qkv.tasks.language_model.runner.LanguageModel`, a tagger, a reader...
    (``options``: what the runner's ``load`` takes, such as ``precision="bfloat16"``).

    Raises:
        FileNotFoundError: ``model_dir`` holds no ``config.json``.
    """
    from qkv.tasks.run_dir import model_task

    return model_task(model_dir).load(model_dir, **options)


def train(
    config: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = False,
    **overrides: Any,
) -> Path:
    """Train a run configuration and return the directory of the trained model.

    Args:
        config: a YAML file, or the name of a configuration shipped with qkv (``"demo"``,
            ``"reading/cloze-as-reader"``; ``qkv configs`` lists them).
        overwrite: start afresh in an ``out_dir`` that already holds a run.
        progress: show a progress bar.
        overrides: settings to change, a double underscore for each dot of the key
            (``train__max_steps=100`` is ``--set train.max_steps=100``; ``out_dir="runs/x"``).
    """
    import json

    from qkv.presets import config_path
    from qkv.tasks.run_config import load_run_config
    from qkv.tasks.run_skeleton import run_training

    sets = [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in overrides.items()]
    run = load_run_config(config_path(str(config)), sets)
    return run_training(run, progress=progress, overwrite=overwrite).model_dir


__getattr__, __dir__ = lazy_exports(
    globals(),
    {**dict.fromkeys(_ATTENTION, "qkv.attention"), "show_attention": "qkv.tasks.raw_attention"},
)

"""A run directory: what a training run writes, how a new run claims one, and how a stopped run
or a trained model's configuration is read back. Shared by every task.

    config.json             the run configuration (task, model, data, training, decoding)
    model.safetensors       the best weights
    *tokenizer*.json        the vocabularies
    labels.json             a classifier's labels or a tagger's tags
    manifest.json           the size and SHA-256 of each file above (:mod:`qkv.manifest`)
    metrics.csv, tensorboard/, checkpoints/, snapshots/, results.json

Every load of a run reads its configuration through :func:`load_model_run_config`, which first
checks the files ``manifest.json`` lists (:func:`check_run_files`): a vocabulary with two words
swapped, reversed labels, flipped bits in the weights, a truncated or deleted file are refused by
name, not loaded into wrong answers. The run writes the manifest last, each time it writes its
files (:func:`save_manifest`): at the start (configuration, vocabularies, labels), after each new
best weights, for each snapshot, and again on resume. A run with no manifest was saved before qkv
kept one: it is unverified and loads, evaluates and resumes as it always did; a resume writes it
one (the files as they are then: what the older code trusted). A kill between the best weights
and the manifest after them leaves a manifest that refuses those weights (safe, not silent);
the run's next best weights write it again.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from qkv.io import atomic_write_json, remove_stale_temporaries
from qkv.manifest import MANIFEST_FILE, Entry, verify_manifest, write_manifest
from qkv.tasks.registry import task
from qkv.tasks.run_config import RunConfig, apply_overrides, move_saved_keys, run_config_from_dict
from qkv.tasks.spec import TaskSpec
from qkv.training.checkpoint import CheckpointError, read_json
from qkv.training.metrics_log import TENSORBOARD_DIR
from qkv.training.state import (
    CHECKPOINTS,
    check_checkpoint,
    complete_checkpoints,
    latest_checkpoint,
)

logger = logging.getLogger(__name__)

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"
SOURCE_TOKENIZER, TARGET_TOKENIZER = "source_tokenizer.json", "target_tokenizer.json"
TOKENIZER_FILE = "tokenizer.json"  # the one vocabulary of a language model or an encoder
LABELS_FILE = "labels.json"  # a classifier's labels or a tagger's tags, in id order
VOCAB_FILE = "vocab.json"  # a captioner's words
# What a loader reads: the files manifest.json records (each one the run wrote).
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, SOURCE_TOKENIZER, TARGET_TOKENIZER, TOKENIZER_FILE,
               LABELS_FILE, VOCAB_FILE)  # fmt: skip
# What a resume reads: not the best weights (it continues from its checkpoint, and keeps their
# manifest entry until it writes better ones).
RESUME_READS = tuple(name for name in MODEL_FILES if name != WEIGHTS_FILE)
RESTORE = "restore it from a copy of the run, or train the model again"
# What marks a CTranslate2 export (qkv.ctranslate2.export), told apart from a run directory.
EXPORT_DIR, EXPORT_FILE, EXPORT_WEIGHTS = "qkv", "export.json", "model.bin"


class RunDirError(ValueError):
    """The run directory cannot be used as asked (it holds another run, or nothing to resume)."""


# What a fresh run writes into its directory (removed by ``overwrite=True``).
RUN_OUTPUTS = (
    CONFIG_FILE,
    WEIGHTS_FILE,
    SOURCE_TOKENIZER,
    TOKENIZER_FILE,
    TARGET_TOKENIZER,
    LABELS_FILE,
    VOCAB_FILE,
    MANIFEST_FILE,
    "metrics.csv",
    "results.json",
    "snapshots",
    CHECKPOINTS,
    TENSORBOARD_DIR,
)


def resume_config(run_dir: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """The configuration a run in ``run_dir`` was started with, with ``overrides`` applied to
    its ``train`` section only (to extend a budget, say); the model and data cannot change."""
    run_dir = Path(run_dir)
    for item in overrides or []:
        if not item.strip().startswith("train."):
            raise RunDirError(
                f"--set {item}: a resumed run keeps its model, data and decoding; only train.* "
                "settings (budgets, evaluation, checkpoints) can change"
            )
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirError(f"nothing to resume: {run_dir} holds no run ({CONFIG_FILE} is missing)")
    if not complete_checkpoints(run_dir):
        again = f"qkv train CONFIG --set out_dir={run_dir}"
        if run_evidence(run_dir):
            again += " --overwrite"
        raise RunDirError(
            f"nothing to resume: {run_dir / CHECKPOINTS} holds no complete checkpoint (a run saves "
            "one every train.checkpoint_every steps and when a signal stops it); start the run "
            f"again with `{again}`"
        )
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:  # a corrupt checkpoint is refused before the resume writes a file
        check_checkpoint(checkpoint)
    return load_model_run_config(run_dir, overrides, out_dir=str(run_dir), verify=RESUME_READS)


def run_evidence(out: Path) -> list[str]:
    """What makes ``out`` hold a run worth keeping: a complete checkpoint, trained weights or
    snapshots. Files a run wrote before it failed (its configuration, vocabularies, metrics)
    are not: they are the leftovers a new run replaces."""
    found = [str(path.relative_to(out)) for path in complete_checkpoints(out)[-1:]]
    if (out / WEIGHTS_FILE).is_file():
        found.append(WEIGHTS_FILE)
    if (out / "snapshots").is_dir() and any((out / "snapshots").rglob(WEIGHTS_FILE)):
        found.append("snapshots")
    return found


def claim_run_dir(out: Path, overwrite: bool) -> None:
    """Refuse a directory that holds another run (:func:`run_evidence`), unless ``overwrite``;
    then clear what a run writes there, leftovers of a failed start included."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"out_dir {out} exists and is not a directory")
    existing = [name for name in RUN_OUTPUTS if (out / name).exists()]
    if not existing:
        return
    evidence = run_evidence(out)
    if evidence and not overwrite:
        resume = (
            f"continue it with `qkv train --resume {out}`, " if complete_checkpoints(out) else ""
        )
        raise RunDirError(
            f"{out} already holds a run ({', '.join(evidence)}); {resume}start again with "
            "--overwrite, or choose another out_dir"
        )
    if not evidence:
        logger.warning(
            "%s holds no checkpoint and no trained model, only the files of a run that stopped "
            "before either (%s): replacing them",
            out,
            ", ".join(existing),
        )
    for name in existing:
        path = out / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    remove_stale_temporaries(out)


def snapshot_dir(model_dir: str | Path, minutes: float) -> Path:
    """Where the snapshot taken at ``minutes`` on the budget clock lives: ``snapshots/10min``."""
    return Path(model_dir) / "snapshots" / f"{minutes:g}min"


def load_model_run_config(
    model_dir: str | Path,
    overrides: list[str] | None = None,
    *,
    out_dir: str | None = None,
    verify: Collection[str] | None = None,
) -> RunConfig:
    """The run configuration saved in a model directory (``overrides`` applied, ``out_dir``
    replaced when given), once the files its manifest lists are checked (those in ``verify``,
    when given: a caller that loads the rest through this function again checks them then);
    errors name the file."""
    directory = Path(model_dir)
    if is_ctranslate2_export(directory):
        raise RunDirError(
            f"{directory} is a CTranslate2 export, not a qkv run directory: pass --engine "
            "ctranslate2 (CTranslate2Translator or CTranslate2Generator in Python), or the run "
            "directory it was exported from"
        )
    check_run_files(directory, only=verify)
    path = directory / CONFIG_FILE
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} must hold a JSON object, got {type(raw).__name__}")
    raw = {k: v for k, v in raw.items() if k != "snapshot"}  # the mark of a snapshot directory
    if out_dir is not None:
        raw["out_dir"] = out_dir
    try:
        return run_config_from_dict(apply_overrides(move_saved_keys(raw), overrides or []))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: {error}") from None


def check_run_files(model_dir: str | Path, only: Collection[str] | None = None) -> bool:
    """Check the files of ``model_dir`` its ``manifest.json`` lists (those in ``only``, when
    given): a :class:`~qkv.manifest.ManifestError` names one missing or changed. ``False`` for a
    run saved before manifests (unverified; it loads as before)."""
    if verify_manifest(model_dir, remedy=RESTORE, only=only):
        return True
    logger.info("%s has no %s (saved before qkv kept one): its files are not verified",
                model_dir, MANIFEST_FILE)  # fmt: skip
    return False


def save_manifest(
    directory: str | Path,
    *,
    written: Collection[str] = MODEL_FILES,
    replacing: Mapping[str, Entry] | None = None,
) -> None:
    """Write ``directory/manifest.json`` after the run wrote the files ``written``: those are
    hashed now, the others it lists keep their entries (a file changed on disk meanwhile stays
    refused); a model file present but not yet listed is hashed now. ``replacing``: the files
    about to be renamed into place, by their new entries (:func:`qkv.manifest.write_manifest`)."""
    replacing = replacing or {}
    unchanged = [name for name in MODEL_FILES if name not in written and name not in replacing]
    write_manifest(directory, MODEL_FILES, unchanged=unchanged, replacing=replacing)


def is_ctranslate2_export(directory: Path) -> bool:
    """Whether ``directory`` holds a CTranslate2 export (``qkv export --format ctranslate2``)."""
    return (directory / EXPORT_WEIGHTS).is_file() and (
        directory / EXPORT_DIR / EXPORT_FILE
    ).is_file()


SPLITS = ("train", "valid", "test")
RESULTS_FILE = "results.json"  # the scores of `qkv evaluate`, by split


def check_split(split: str, splits: tuple[str, ...] = SPLITS) -> str:
    """``split`` if it is one of ``splits``; otherwise an error naming them."""
    if split not in splits:
        named = " or ".join([", ".join(splits[:-1]), splits[-1]] if len(splits) > 1 else splits)
        raise ValueError(f"split must be {named}, got {split!r}")
    return split


def save_results(model_dir: str | Path, split: str, record: dict) -> Path:
    """Record the scores ``record`` under ``split`` in ``model_dir/results.json`` (other splits
    kept); an ``OSError`` (a read-only directory) names the file. Returns its path."""
    results_path = Path(model_dir) / RESULTS_FILE
    results = read_json(results_path) if results_path.is_file() else {}
    if not isinstance(results, dict):
        raise CheckpointError(
            f"{results_path} must hold a JSON object, got {type(results).__name__}"
        )
    results[split] = record
    atomic_write_json(results_path, results)
    return results_path


def model_task(model_dir: str | Path) -> TaskSpec:
    """The task of the trained model (or run) in ``model_dir``; errors name the file."""
    directory = Path(model_dir)
    if not (directory / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
    # The configuration it reads is checked now; the runner's load checks the other files.
    return task(load_model_run_config(directory, verify=(CONFIG_FILE,)).task)


def load_runner(model_dir: str | Path) -> tuple[TaskSpec, Any]:
    """The task of ``model_dir`` and the model loaded as its :class:`~qkv.tasks.spec.Runner`."""
    spec = model_task(model_dir)
    return spec, spec.load(model_dir)

"""Small trained models of every kind the explorer shows, for its tests and its load test: a
Transformer translating the reverse task, a character language model on the King James Bible, a
Transformer classifier and tagger on small real-word files, a ViT and a captioner on
scikit-learn's real 8x8 digits; on request, RNN translators with Bahdanau attention and with
none (the fixed-context baseline). A few dozen steps each (seconds): the explorer's tests check what
it shows of a model, not how good the model is."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import torch
import yaml
from filelock import FileLock

from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_skeleton import run_training

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("translation", "language_model", "classification", "tagging", "vit", "caption")


def _train(config_path: Path, overrides: list[str]) -> None:
    config = load_run_config(config_path, overrides)
    run_training(config, progress=False, overwrite=True)


def _write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _encoder_config(folder: Path, task: str, data: dict, family: str) -> Path:
    return _write(
        folder / f"{task}.yaml",
        {
            "task": task,
            "out_dir": str(folder / task),
            "data": {**data, "vocab_size": 100, "max_len": 32},
            "model": {"family": family, "preset": "tiny", "max_len": 32},
            "train": {
                "max_steps": 30, "batch_tokens": 1024, "lr": 0.003, "warmup_steps": 5,
                "eval_every": 30, "checkpoint_every": None, "label_smoothing": 0.0,
                "tensorboard": False,
            },
        },
    )  # fmt: skip


# Kinds trained from a preset in configs/: (folder, config, overrides), a few dozen steps each.
FROM_CONFIGS = {
    "translation": ("reverse", "configs/tiny/reverse-transformer.yaml",
                    ["train.max_steps=40", "data.options.n_train=2000"]),
    "language_model": ("kjv-char", "configs/tiny/lm-kjv-char.yaml",
                       ["train.max_steps=30", "data.valid_tokens=2000"]),
    "vit": ("vit-digits", "configs/vit/digits.yaml",
            ["train.max_steps=30", "train.max_minutes=null"]),
    "caption": ("caption-digits", "configs/caption/tiny.yaml", ["train.max_steps=30"]),
    "bahdanau": ("reverse-bahdanau", "configs/tiny/reverse-rnn-bahdanau.yaml",
                 ["train.max_steps=20", "data.options.n_train=2000"]),
    "fixed-context": ("reverse-none", "configs/tiny/reverse-rnn-none.yaml",
                      ["train.max_steps=20", "data.options.n_train=2000"]),
}  # fmt: skip
COMMON = ["train.tensorboard=false", "train.checkpoint_every=null", "train.warmup_steps=5",
          "train.eval_every=30"]  # fmt: skip


def _write_files(folder: Path) -> None:
    """A small labelled file of review-like sentences and a small tagged file."""
    rng = random.Random(3)
    rows = ["text\tlabel"]
    for _ in range(200):
        label = rng.choice(["pos", "neg"])
        words = rng.choices(["the", "film", "plot", "was", "very", "and", "cast"], k=6)
        words.insert(rng.randrange(7), rng.choice(
            ["superb", "witty"] if label == "pos" else ["dull", "tired"]))  # fmt: skip
        rows.append(f"{' '.join(words)}\t{label}")
    (folder / "reviews.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    lines = []
    for _ in range(200):
        count = rng.randint(2, 9)
        lines.append(
            " ".join(rng.choice(["to/TO", "walk/NN", "7/CD", "./."]) for _ in range(count))
        )
    (folder / "tagged.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def model_dir(folder: Path, kind: str) -> Path:
    """Where :func:`train_models` puts the model of ``kind`` under ``folder``."""
    return folder / (FROM_CONFIGS[kind][0] if kind in FROM_CONFIGS else kind)


def shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this test run that every pytest-xdist worker sees (the workers' base
    temporary folders are siblings)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / name
    folder.mkdir(exist_ok=True)
    return folder


def train_shared(
    tmp_path_factory,
    name: str,
    kinds: tuple[str, ...],
    train: Callable[[Path, tuple[str, ...]], dict[str, Path]],
    where: Callable[[Path, str], Path],
) -> dict[str, Path]:
    """The models of ``kinds`` trained by ``train(folder, kinds)`` once per test run, whichever
    module and worker asks first; the others wait for it and read the same directories. A
    test that changes a model copies it first. Trained on one thread."""
    folder = shared_folder(tmp_path_factory, name)
    with FileLock(str(folder / ".lock")):
        missing = tuple(kind for kind in kinds if not (folder / f".{kind}.done").exists())
        if missing:
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                train(folder, missing)
            finally:
                torch.set_num_threads(before)
            for kind in missing:
                (folder / f".{kind}.done").touch()
    return {kind: where(folder, kind) for kind in kinds}


def explorer_models(tmp_path_factory, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """:func:`train_models` of ``kinds``, once per test run (:func:`train_shared`)."""
    return train_shared(tmp_path_factory, "explorer-models", kinds, train_models, model_dir)


def train_models(folder: Path, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """Train the models of ``kinds`` under ``folder``; their directories by kind."""
    folder.mkdir(parents=True, exist_ok=True)
    dirs: dict[str, Path] = {}
    for kind, (name, config, overrides) in FROM_CONFIGS.items():
        if kind in kinds:
            dirs[kind] = folder / name
            _train(ROOT / config, [f"out_dir={dirs[kind]}", *overrides, *COMMON])
    if "classification" in kinds or "tagging" in kinds:
        _write_files(folder)
    if "classification" in kinds:
        data = {"corpus": "file", "options": {"path": str(folder / "reviews.tsv")}}
        _train(_encoder_config(folder, "classification", data, "encoder_classifier"), [])
        dirs["classification"] = folder / "classification"
    if "tagging" in kinds:
        data = {"corpus": "file", "options": {"train": str(folder / "tagged.txt")}}
        _train(_encoder_config(folder, "tagging", data, "sequence_tagger"), [])
        dirs["tagging"] = folder / "tagging"
    return dirs

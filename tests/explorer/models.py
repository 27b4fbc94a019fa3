"""Small trained models of every kind the explorer shows, for its tests and its load test: a
Transformer translating the reverse task, a character language model on the King James Bible, a
Transformer classifier and tagger on small real-word files, a ViT and a captioner on
scikit-learn's real 8x8 digits; on request, RNN translators with Bahdanau attention and with
none (the fixed-context baseline). A few dozen steps each (seconds): the explorer's tests check what
it shows of a model, not how good the model is."""

from __future__ import annotations

import random
from pathlib import Path

import yaml

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

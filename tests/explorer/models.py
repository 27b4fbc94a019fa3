"""Small trained models of every kind the explorer shows, for its tests and its load test: a
Transformer translating the reverse task, a character language model on the King James Bible, a
Transformer classifier and tagger on small real-word files, a ViT and a captioner on
scikit-learn's real 8x8 digits. A few dozen steps each (seconds): the explorer's tests check what
it shows of a model, not how good the model is."""

from __future__ import annotations

import importlib
import random
from pathlib import Path

import yaml

from qkv.cli.train import TRAINERS
from qkv.tasks.run_config import load_run_config

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("translation", "language_model", "classification", "tagging", "vit", "caption")


def _train(config_path: Path, overrides: list[str]) -> None:
    config = load_run_config(config_path, overrides)
    module, function = TRAINERS[config.task]
    getattr(importlib.import_module(module), function)(config, progress=False, overwrite=True)


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


def train_models(folder: Path, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """Train the models of ``kinds`` under ``folder``; their directories by kind."""
    folder.mkdir(parents=True, exist_ok=True)
    dirs: dict[str, Path] = {}
    common = ["train.tensorboard=false", "train.checkpoint_every=null", "train.warmup_steps=5"]
    if "translation" in kinds:
        dirs["translation"] = folder / "reverse"
        _train(
            ROOT / "configs/tiny/reverse-transformer.yaml",
            [f"out_dir={dirs['translation']}", "train.max_steps=40", "train.eval_every=40",
             "data.options.n_train=2000", *common],
        )  # fmt: skip
    if "language_model" in kinds:
        dirs["language_model"] = folder / "kjv-char"
        _train(
            ROOT / "configs/tiny/lm-kjv-char.yaml",
            [f"out_dir={dirs['language_model']}", "train.max_steps=30", "train.eval_every=30",
             "data.valid_tokens=2000", *common],
        )  # fmt: skip
    if "classification" in kinds or "tagging" in kinds:
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
            words = [
                rng.choice(["to/TO", "walk/NN", "7/CD", "./."]) for _ in range(rng.randint(2, 9))
            ]
            lines.append(" ".join(words))
        (folder / "tagged.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if "classification" in kinds:
        data = {"corpus": "file", "options": {"path": str(folder / "reviews.tsv")}}
        _train(_encoder_config(folder, "classification", data, "encoder_classifier"), [])
        dirs["classification"] = folder / "classification"
    if "tagging" in kinds:
        data = {"corpus": "file", "options": {"train": str(folder / "tagged.txt")}}
        _train(_encoder_config(folder, "tagging", data, "sequence_tagger"), [])
        dirs["tagging"] = folder / "tagging"
    if "vit" in kinds:
        dirs["vit"] = folder / "vit-digits"
        _train(
            ROOT / "configs/vit/digits.yaml",
            [f"out_dir={dirs['vit']}", "train.max_steps=30", "train.eval_every=30",
             "train.max_minutes=null", *common],
        )  # fmt: skip
    if "caption" in kinds:
        dirs["caption"] = folder / "caption-digits"
        _train(
            ROOT / "configs/caption/tiny.yaml",
            [f"out_dir={dirs['caption']}", "train.max_steps=30", "train.eval_every=30", *common],
        )  # fmt: skip
    return dirs

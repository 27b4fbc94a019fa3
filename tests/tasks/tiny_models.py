"""Model directories of every predict-style kind, trained for two steps on tiny data (seconds
in all): the input checks' tests need real saved models (their lengths come from the saved
configuration), not good ones."""

from __future__ import annotations

import string
from pathlib import Path

from tests.explorer.models import ROOT, _encoder_config, _write, _write_files, train_shared
from tests.explorer.models import _train as _train_config

KINDS = ("translation", "language_model", "classification", "tagging", "vit", "caption")
# Few steps and no evaluation to speak of: what the tests read is the saved configuration.
QUICK = [
    "train.max_steps=2",
    "train.eval_every=2",
    "train.warmup_steps=1",
    "train.checkpoint_every=null",
    "train.tensorboard=false",
]


def _train(config: Path, overrides: list[str]) -> None:
    _train_config(config, [*overrides, *QUICK])


def tiny_models(tmp_path_factory, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """:func:`train_tiny` of ``kinds``, once per test run for every module and worker."""
    return train_shared(
        tmp_path_factory, "tiny-models", kinds, train_tiny, lambda folder, kind: folder / kind
    )


def train_tiny(folder: Path, kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """Train each kind under ``folder``; the model directories by kind.

    Lengths: the translator was trained on sources of up to 16 tokens (hard limit 128); the
    character language model on windows of 32 (max_len 64); classifier and tagger on 16 ids
    (position table 32); the ViT at 8x8 pixels, 2x2 patches (16 patches; hard limit 128);
    the captioner on strips of 1-2 tiles (hard limit 16).
    """
    folder.mkdir(parents=True, exist_ok=True)
    dirs = {kind: folder / kind for kind in kinds}
    if "translation" in kinds:
        _train(
            ROOT / "configs/tiny/reverse-transformer.yaml",
            [
                f"out_dir={dirs['translation']}",
                "data.options.n_train=300",
                "data.options.n_valid=10",
                "data.options.n_test=10",
                "data.valid_bleu_sentences=0",
            ],
        )
    if "language_model" in kinds:
        text = folder / "alphabet.txt"
        text.write_text((string.ascii_lowercase + " .\n") * 200, encoding="utf-8")
        config = {
            "task": "language_model",
            "out_dir": str(dirs["language_model"]),
            "data": {
                "corpus": "text",
                "options": {"path": str(text), "valid_fraction": 0.1},
                "block_size": 32,
                "valid_tokens": 200,
            },
            "model": {"family": "transformer_lm", "preset": "tiny", "num_layers": 1, "max_len": 64},
            "train": {"batch_tokens": 256, "lr": 0.01, "label_smoothing": 0.0},
            "decode": {"max_new_tokens": 10, "temperature": 0.0},
        }
        _train(_write(folder / "lm.yaml", config), [])
    if "classification" in kinds or "tagging" in kinds:
        _write_files(folder)  # reviews.tsv and tagged.txt
    for kind, data, family in (
        ("classification", {"path": str(folder / "reviews.tsv")}, "encoder_classifier"),
        ("tagging", {"train": str(folder / "tagged.txt")}, "sequence_tagger"),
    ):
        if kind in kinds:
            data = {"corpus": "file", "options": data}
            _train(_encoder_config(folder, kind, data, family), ["data.max_len=16"])
    if "vit" in kinds:
        _train(
            ROOT / "configs/vit/digits.yaml",
            [f"out_dir={dirs['vit']}", "train.max_minutes=null", "model.num_layers=1"],
        )
    if "caption" in kinds:
        _train(
            ROOT / "configs/caption/tiny.yaml",
            [
                f"out_dir={dirs['caption']}",
                "data.train_strips=64",
                "data.valid_strips=8",
                "data.test_strips=8",
            ],
        )
    return dirs

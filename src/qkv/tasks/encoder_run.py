"""What classification and tagging runs share: the vocabulary (a BPE trained on the training
text, or a pretrained encoder's), the model (from a preset, or around a pretrained BERT-family
encoder), and the files of a model directory (``config.json``, ``labels.json``,
``tokenizer.json``, ``model.safetensors``).

A model that starts from a pretrained encoder names it in its model section
(``pretrained: minilm``, or a folder with ``config.json``, ``model.safetensors`` and
``tokenizer.json``). The pretrained encoder's architecture is written into the saved
configuration, so a trained model directory loads without the pretrained folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from qkv.data.tokenizer import SubwordTokenizer, check_vocab_size
from qkv.io import atomic_write_json
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model, config_to_dict
from qkv.tasks.encoder_inputs import TextInputs
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    LABELS_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    claim_run_dir,
    load_model_run_config,
)
from qkv.training.checkpoint import CheckpointError, load_weights, read_json, save_weights
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainResult, train, training_device

# The model-section key naming the label count, per task.
LABEL_KEY = {"classification": "num_labels", "tagging": "num_tags"}


@dataclass
class EncoderRun:
    """A classifier or tagger ready to train or to use."""

    model: nn.Module
    inputs: TextInputs
    labels: tuple[str, ...]
    out_dir: Path
    distributed: Distributed
    parameters: int


def model_values(
    config: RunConfig, vocab_size: int, num_labels: int, bert: Any | None
) -> dict[str, Any]:
    """The model section with its ``preset`` expanded, the vocabulary and label counts set and,
    when fine-tuning, the pretrained encoder's architecture filled in."""
    values = with_preset(config.family, config.model)
    values.pop("pretrained", None)
    values = {**values, "vocab_size": vocab_size, LABEL_KEY[config.task]: num_labels}
    if bert is not None:  # the pretrained encoder's BertConfig
        values["encoder"] = "bert"
        values["bert"] = config_to_dict(bert)
    return values


def pretrained_folder(config: RunConfig) -> Path | None:
    """The folder of ``model.pretrained`` (``minilm``: the installed all-MiniLM-L6-v2), if any;
    checks that the data section uses its vocabulary."""
    name = config.model.get("pretrained")
    if name is None:
        if config.data.tokenizer == "pretrained":  # type: ignore[union-attr]
            raise ValueError("data.tokenizer: pretrained needs model.pretrained (e.g. minilm)")
        return None
    if config.data.tokenizer != "pretrained":  # type: ignore[union-attr]
        raise ValueError(
            f"model.pretrained={name!r} reads its own vocabulary: set data.tokenizer: pretrained"
        )
    from qkv.tasks.embedding import model_folder

    return model_folder(str(name))


def prepare_encoder_run(
    config: RunConfig,
    *,
    labels: Sequence[str],
    bpe_text: Sequence[str],
    resume: bool,
    overwrite: bool,
    distributed: Distributed | None,
) -> EncoderRun:
    """Claim the run directory, make or read the vocabulary, build the model (pretrained
    weights loaded when fine-tuning) and write the model directory's files (rank 0)."""
    dist_ = distributed or Distributed()
    out = Path(config.out_dir)
    training_device(config.train, dist_)  # reject what can be rejected before any write
    if not resume and dist_.main:
        claim_run_dir(out, overwrite)
    torch.manual_seed(config.train.seed)
    data = config.data
    # A resumed run's saved model section already holds the pretrained architecture.
    pretrained = None if resume else pretrained_folder(config)
    if resume or not dist_.main:
        dist_.barrier()  # rank 0 has written the vocabulary
    elif pretrained is not None:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pretrained / TOKENIZER_FILE, out / TOKENIZER_FILE)
    else:
        out.mkdir(parents=True, exist_ok=True)
        SubwordTokenizer.train(bpe_text, data.vocab_size).save(out / TOKENIZER_FILE)  # type: ignore[union-attr]
    inputs = TextInputs.load(
        out / TOKENIZER_FILE,
        kind=data.tokenizer,  # type: ignore[union-attr]
        max_len=data.max_len,  # type: ignore[union-attr]
    )
    encoder = None
    if pretrained is not None:
        from qkv.interop.bert import load_bert

        encoder = load_bert(pretrained)
    bert = None if encoder is None else encoder.config
    model_config = build_config(
        config.family, model_values(config, inputs.vocab_size, len(labels), bert)
    )
    _check_positions(model_config, data.max_len)  # type: ignore[union-attr]
    model = build_model(config.family, model_config)
    if encoder is not None:  # start from the pretrained weights (a resume reads its own)
        model.encoder.load_state_dict(encoder.state_dict())
    if dist_.main:
        saved = config.to_dict()
        saved["model"] = {"family": config.family, **config_to_dict(model_config)}
        atomic_write_json(out / CONFIG_FILE, saved)
        atomic_write_json(out / LABELS_FILE, list(labels))
        if not resume:
            dist_.barrier()
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return EncoderRun(model, inputs, tuple(labels), out, dist_, parameters)


@dataclass(frozen=True)
class TrainedEncoder:
    """A finished classification or tagging run: where its model is, how training ended."""

    model_dir: Path
    result: TrainResult
    parameters: int


def train_encoder_run(
    run: EncoderRun,
    config: RunConfig,
    *,
    loss_fn: Callable[[nn.Module, Any], tuple[torch.Tensor, torch.Tensor]],
    batches: Callable[[int, int], Iterable[Any]],
    evaluate: Callable[[], dict[str, float]],
    resume: bool,
    handle_signals: bool,
    progress: bool,
) -> TrainedEncoder:
    """Train ``run.model`` with the engine; the weights with the best ``valid_accuracy`` go to
    the run directory. Batches are :class:`~qkv.tasks.encoder_inputs.EncoderBatch` es."""
    result = train(
        run.model,
        loss_fn=loss_fn,
        batches=batches,
        config=config.train,
        evaluate=evaluate,
        metric="valid_accuracy",
        higher_is_better=True,
        on_best=lambda _: save_weights(run.model, run.out_dir / WEIGHTS_FILE),
        run_dir=run.out_dir,
        resume=resume,
        handle_signals=handle_signals,
        progress=progress,
        count_tokens=lambda batch: int(batch.keep.sum()),
        distributed=run.distributed,
    )
    return TrainedEncoder(run.out_dir, result, run.parameters)


def _check_positions(model_config: Any, max_len: int) -> None:
    text = model_config.text  # None beside a BERT encoder
    limit = model_config.bert_config().max_position_embeddings if text is None else text.max_len
    if max_len > limit:
        raise ValueError(f"data.max_len={max_len} exceeds the model's {limit} positions")


def load_encoder_dir(model_dir: str | Path, *, task: str) -> tuple[EncoderRun, RunConfig]:
    """A trained classifier or tagger from its directory; errors name the file at fault."""
    directory = Path(model_dir)
    if not (directory / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
    config = load_model_run_config(directory)
    if config.task != task:
        raise ValueError(f"{directory} holds a {config.task} model, not a {task} model")
    labels = read_json(directory / LABELS_FILE)
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise CheckpointError(f"{directory / LABELS_FILE} must hold a list of label names")
    inputs = TextInputs.load(
        directory / TOKENIZER_FILE,
        kind=config.data.tokenizer,  # type: ignore[union-attr]
        max_len=config.data.max_len,  # type: ignore[union-attr]
    )
    model_config = build_config(config.family, config.model)
    check_vocab_size(directory / TOKENIZER_FILE, inputs.vocab_size, model_config.vocab_size)
    model = build_model(config.family, model_config)
    load_weights(model, directory / WEIGHTS_FILE)
    parameters = sum(p.numel() for p in model.parameters())
    run = EncoderRun(model.eval(), inputs, tuple(labels), directory, Distributed(), parameters)
    return run, config

"""What classification and tagging runs share beyond the run skeleton
(:class:`~qkv.tasks.run_skeleton.TrainingRun`): the vocabulary (a BPE trained on the training
text, or a pretrained encoder's), the model (from a preset, or around a pretrained BERT-family
encoder), and the files of a model directory (``config.json``, ``labels.json``,
``tokenizer.json``, ``model.safetensors``).

    run = TrainingRun(config, task="classification", ...)
    encoder = prepare_encoder(run, labels=..., label_key="num_labels", bpe_text=...)
    return run.train(encoder.model, ..., count_tokens=real_tokens)

A model that starts from a pretrained encoder names it in its model section
(``pretrained: minilm``, or a folder with ``config.json``, ``model.safetensors`` and
``tokenizer.json``). The pretrained encoder's architecture is written into the saved
configuration, so a trained model directory loads without the pretrained folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from qkv.data.tokens.subword import SubwordTokenizer, check_vocab_size
from qkv.io import atomic_write_json
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model, config_to_dict
from qkv.tasks.encoder_inputs import EncoderBatch, TextInputs
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    LABELS_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    load_model_run_config,
)
from qkv.tasks.run_skeleton import TrainingRun
from qkv.tasks.sections import EncoderDataConfig
from qkv.training.checkpoint import CheckpointError, load_weights, read_json


@dataclass
class EncoderModel:
    """A classifier or tagger with the inputs it reads and its label names (a tagger's tags)."""

    model: nn.Module
    inputs: TextInputs
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Vocabulary:
    """A run's vocabulary: the :class:`TextInputs` read through it and what its
    ``tokenizer.json`` is: a BPE this run trained (``bpe``), or a file copied as it is (the
    pretrained encoder's, or the run's own when it is read back)."""

    inputs: TextInputs
    bpe: SubwordTokenizer | None = None
    file: Path | None = None

    @classmethod
    def read(cls, path: Path, data: EncoderDataConfig) -> Vocabulary:
        """The ``tokenizer.json`` at ``path``, read as ``data`` says."""
        inputs = TextInputs.load(path, kind=data.tokenizer, max_len=data.max_len)
        return cls(inputs, file=path)

    @classmethod
    def make(
        cls, data: EncoderDataConfig, pretrained: Path | None, bpe_text: Sequence[str]
    ) -> Vocabulary:
        """The pretrained encoder's vocabulary, or a BPE of ``data.vocab_size`` ids trained on
        ``bpe_text``."""
        if pretrained is not None:
            return cls.read(pretrained / TOKENIZER_FILE, data)
        bpe = SubwordTokenizer.train(bpe_text, data.vocab_size)
        inputs = TextInputs.from_json(
            bpe.to_json(), kind=data.tokenizer, max_len=data.max_len, source="the trained BPE"
        )
        return cls(inputs, bpe=bpe)

    def save(self, directory: Path) -> None:
        """Write ``directory/tokenizer.json``."""
        target = directory / TOKENIZER_FILE
        if self.bpe is not None:
            self.bpe.save(target)
        elif self.file is not None and self.file != target:
            shutil.copyfile(self.file, target)


def model_values(
    config: RunConfig,
    vocab_size: int,
    label_key: str | None,
    num_labels: int,
    bert: Any | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model section with its ``preset`` expanded, the vocabulary and label counts set
    (``label_key``: the family's name for the label count; ``None``: a model without labels),
    the task's ``extra`` sizes, and, when fine-tuning, the pretrained encoder's architecture
    filled in."""
    values = with_preset(config.family, config.model)
    values.pop("pretrained", None)
    labels = {} if label_key is None else {label_key: num_labels}
    values = {**values, "vocab_size": vocab_size, **labels, **(extra or {})}
    if bert is not None:  # the pretrained encoder's BertConfig
        values["encoder"] = "bert"
        values["bert"] = config_to_dict(bert)
    return values


def pretrained_folder(config: RunConfig, data: Any = None) -> Path | None:
    """The folder of ``model.pretrained`` (``minilm``: the installed all-MiniLM-L6-v2), if any;
    checks that the data section (``data``: the run's, if it is not an
    :class:`EncoderDataConfig`) uses its vocabulary."""
    data = config.section("data", EncoderDataConfig) if data is None else data
    name = config.model.get("pretrained")
    if name is None:
        if data.tokenizer == "pretrained":
            raise ValueError("data.tokenizer: pretrained needs model.pretrained (e.g. minilm)")
        return None
    if data.tokenizer != "pretrained":
        raise ValueError(
            f"model.pretrained={name!r} reads its own vocabulary: set data.tokenizer: pretrained"
        )
    from qkv.data.sources.pretrained import model_folder

    return model_folder(str(name))


def prepare_encoder(
    run: TrainingRun,
    *,
    labels: Sequence[str] | None,
    label_key: str | None = None,
    bpe_text: Sequence[str],
    extra: Mapping[str, Any] | None = None,
    data: Any = None,
) -> EncoderModel:
    """Make (rank 0) or read the vocabulary, build the model (pretrained weights loaded when
    fine-tuning) and save the run's files (:meth:`TrainingRun.save`: ``config.json``,
    ``labels.json``, ``tokenizer.json``). ``label_key`` names the label count in the model
    section (``num_labels``, ``num_tags``); ``labels=None``: a model without labels (no
    ``labels.json``); ``extra``: other sizes the task sets; ``data``: the run's data section
    when it is not an :class:`EncoderDataConfig` (it has ``tokenizer``, ``vocab_size`` and
    ``max_len`` all the same)."""
    config = run.config
    data = config.section("data", EncoderDataConfig) if data is None else data
    if (labels is None) != (label_key is None):
        raise ValueError("give labels and label_key together, or neither")
    # A resumed run's saved model section already holds the pretrained architecture.
    pretrained = None if run.resume else pretrained_folder(config, data)
    vocabulary = run.shared(
        make=lambda: Vocabulary.make(data, pretrained, bpe_text),
        load=lambda out: Vocabulary.read(out / TOKENIZER_FILE, data),
        save=lambda vocab, out: vocab.save(out),
    )
    inputs = vocabulary.inputs
    encoder = None
    if pretrained is not None:
        from qkv.interop.bert import load_bert

        encoder = load_bert(pretrained)
    bert = None if encoder is None else encoder.config
    model_config = build_config(
        config.family,
        model_values(config, inputs.vocab_size, label_key, len(labels or ()), bert, extra),
    )
    _check_positions(model_config, data.max_len)
    model = build_model(config.family, model_config)
    if encoder is not None:  # start from the pretrained weights (a resume reads its own)
        model.get_submodule("encoder").load_state_dict(encoder.state_dict())

    def write(directory: Path) -> None:
        if labels is not None:
            atomic_write_json(directory / LABELS_FILE, list(labels))
        vocabulary.save(directory)

    run.save(model_config, write=write)
    return EncoderModel(model, inputs, tuple(labels or ()))


def real_tokens(batch: EncoderBatch) -> int:
    """The real (not padding) ids of ``batch``, the engine's token count."""
    return int(batch.keep.sum())


def _check_positions(model_config: Any, max_len: int) -> None:
    text = model_config.text  # None beside a BERT encoder
    limit = model_config.bert_config().max_position_embeddings if text is None else text.max_len
    if max_len > limit:
        raise ValueError(f"data.max_len={max_len} exceeds the model's {limit} positions")


def load_encoder_dir(model_dir: str | Path, *, task: str) -> tuple[EncoderModel, RunConfig]:
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
    data = config.section("data", EncoderDataConfig)
    inputs = TextInputs.load(directory / TOKENIZER_FILE, kind=data.tokenizer, max_len=data.max_len)
    model_config = build_config(config.family, config.model)
    check_vocab_size(directory / TOKENIZER_FILE, inputs.vocab_size, model_config.vocab_size)
    model = build_model(config.family, model_config)
    load_weights(model, directory / WEIGHTS_FILE)
    return EncoderModel(model.eval(), inputs, tuple(labels)), config

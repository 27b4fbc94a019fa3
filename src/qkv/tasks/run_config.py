"""Run configurations: a YAML file with ``data``, ``model``, ``train`` and ``decode`` sections.

Each section becomes a small typed config; unknown keys and bad values are errors that name the
key. ``--set section.key=value`` overrides are parsed as YAML scalars (``train.max_minutes=5``,
``model.attention=luong``, ``data.options.max_words=30``).

    name: transformer-en-fr
    out_dir: runs/transformer-en-fr
    data:   {corpus: bible, options: {source: "4", target: l, max_words: 30}, vocab_size: 8000}
    model:  {family: transformer, d_model: 256, num_heads: 4, ...}
    train:  {max_minutes: 10, batch_tokens: 4096, lr: 7e-4, warmup_steps: 1000, ...}
    decode: {beam_size: 4, length_penalty: 0.6}
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from qkv.config_values import check_values
from qkv.data.errors import decode_utf8
from qkv.data.images.augment import AUGMENTATIONS
from qkv.data.tokens.subword import MAX_VOCAB_SIZE
from qkv.decoding.sampling import SamplingConfig
from qkv.models.registry import check_model_values
from qkv.tasks.registry import task as task_spec
from qkv.tasks.spec import TaskSpec
from qkv.training.trainer import TrainConfig

S = TypeVar("S")


def check_vocab_size(value: int, smallest: int, what: str = "") -> None:
    """``data.vocab_size`` between ``smallest`` and :data:`MAX_VOCAB_SIZE` (the tokenizers
    library aborts the process, with no error to catch, on a vocabulary it cannot allocate)."""
    if not smallest <= value <= MAX_VOCAB_SIZE:
        raise ValueError(
            f"data.vocab_size must be between {smallest} and {MAX_VOCAB_SIZE:,}{what}, got {value}"
        )


@dataclass(frozen=True)
class DataConfig:
    corpus: str = "bible"
    options: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = 8000
    shared_vocab: bool = True
    max_len: int = 128  # subword tokens per side; longer training pairs are dropped
    valid_bleu_sentences: int = 200  # greedy-decoded during training to pick the best model

    def __post_init__(self) -> None:
        check_vocab_size(self.vocab_size, 16)
        if self.max_len < 2:
            raise ValueError(f"data.max_len must be >= 2, got {self.max_len}")
        if self.valid_bleu_sentences < 0:
            raise ValueError(
                f"data.valid_bleu_sentences must be >= 0, got {self.valid_bleu_sentences}"
            )


@dataclass(frozen=True)
class LMDataConfig:
    """A language model's data: a text corpus, its vocabulary and the context length."""

    corpus: str = "shakespeare"  # shakespeare, kjv, or text (options: {path: FILE_OR_FOLDER})
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = "char"  # char, or bpe (byte-level, trained with `tokenizers`)
    vocab_size: int = 8000  # bpe only
    block_size: int = 256  # tokens of context per training sequence
    valid_tokens: int | None = 200_000  # evaluated during training (None: the whole split)

    def __post_init__(self) -> None:
        if self.tokenizer not in ("char", "bpe"):
            raise ValueError(f"data.tokenizer must be char or bpe, got {self.tokenizer!r}")
        if self.tokenizer == "bpe":
            check_vocab_size(self.vocab_size, 260, " for byte-level BPE")
        if self.block_size < 2:
            raise ValueError(f"data.block_size must be >= 2, got {self.block_size}")
        if self.valid_tokens is not None and self.valid_tokens < self.block_size:
            raise ValueError(
                f"data.valid_tokens must be >= data.block_size={self.block_size}, got "
                f"{self.valid_tokens}"
            )


@dataclass(frozen=True)
class EncoderDataConfig:
    """An encoder task's data: a labelled corpus and its vocabulary.

    ``tokenizer``: ``bpe`` (trained on the training text, ``vocab_size`` ids) or ``pretrained``
    (the vocabulary of ``model.pretrained``, which a fine-tuned model must use); ``max_len``: the
    most ids per input, specials included (longer texts are cut; long sentences to tag are
    split into windows of whole words)."""

    corpus: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = "bpe"
    vocab_size: int = 8000
    max_len: int = 128

    def __post_init__(self) -> None:
        if self.tokenizer not in ("bpe", "pretrained"):
            raise ValueError(f"data.tokenizer must be bpe or pretrained, got {self.tokenizer!r}")
        check_vocab_size(self.vocab_size, 16)
        if self.max_len < 3:
            raise ValueError(f"data.max_len must be >= 3, got {self.max_len}")


@dataclass(frozen=True)
class ClassificationDataConfig(EncoderDataConfig):
    corpus: str = "rotten_tomatoes"  # rotten_tomatoes, pang_lee, or file (options: {path: ...})


@dataclass(frozen=True)
class TaggingDataConfig(EncoderDataConfig):
    corpus: str = "pos"  # pos (OANC train, WSJ gold test), or file (options: {train: ...})


@dataclass(frozen=True)
class EntityDataConfig(EncoderDataConfig):
    corpus: str = "wnut16"  # wnut16, or file (options: {train: ..., scheme: iobes, ...})


@dataclass(frozen=True)
class ImageDataConfig:
    """An image classifier's data: an image data set, how training images are augmented and how
    many go in a batch.

    ``corpus``: fashion_mnist, mnist_5k, digits, or folder (``options: {path: DIR, size: 32}``).
    ``augment``: ``none``; ``shift`` (each training image moved by up to ``max_shift`` pixels
    in each direction, the border filled with zeros, the background of these data sets);
    ``shift_flip`` (also mirrored left-right half of the time: right for clothes, wrong for
    digits)."""

    corpus: str = "fashion_mnist"
    options: dict[str, Any] = field(default_factory=dict)
    augment: str = "shift"
    max_shift: int = 2
    batch_size: int = 128  # training images per batch (train.batch_tokens does not apply)

    def __post_init__(self) -> None:
        if self.augment not in AUGMENTATIONS:
            raise ValueError(
                f"data.augment must be one of {', '.join(AUGMENTATIONS)}, got {self.augment!r}"
            )
        if self.max_shift < 0:
            raise ValueError(f"data.max_shift must be >= 0, got {self.max_shift}")
        if self.batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {self.batch_size}")


@dataclass(frozen=True)
class CaptionDataConfig:
    """A captioner's data: strips of ``min_tiles``-``max_tiles`` images of an image data set
    side by side, captioned with their class names in order.

    Training strips are drawn afresh from the training images every epoch
    (``train_strips`` per epoch); validation and test strips are drawn once, with fixed seeds,
    from the held-out images only."""

    corpus: str = "mnist_5k"
    options: dict[str, Any] = field(default_factory=dict)
    min_tiles: int = 2
    max_tiles: int = 4
    train_strips: int = 20_000
    valid_strips: int = 500
    test_strips: int = 1_000
    max_shift: int = 2  # each training tile moved by up to this many pixels (0: no augmentation)
    batch_size: int = 64  # training strips per batch (train.batch_tokens does not apply)

    def __post_init__(self) -> None:
        if not 1 <= self.min_tiles <= self.max_tiles:
            raise ValueError(
                f"data needs 1 <= min_tiles <= max_tiles, got {self.min_tiles}, {self.max_tiles}"
            )
        for name in ("train_strips", "valid_strips", "test_strips", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_shift < 0:
            raise ValueError(f"data.max_shift must be >= 0, got {self.max_shift}")


@dataclass(frozen=True)
class PredictConfig:
    """How a classifier or tagger is run on many inputs."""

    batch_size: int = 64

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"decode.batch_size must be >= 1, got {self.batch_size}")


# The widest beam: far beyond any useful one (4 to 12 are usual), and each hypothesis holds
# its own decoder state (a beam of 10**8 asked for 358 GB).
MAX_BEAM_SIZE = 1000


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 4
    length_penalty: float = 0.6
    max_len_a: float = 1.5  # max output length = a * source length + b
    max_len_b: int = 10
    batch_size: int = 32
    # Beam search stops a sentence once ceil(patience * beam_size) hypotheses have finished
    # (qkv.decoding.beam; 1.0 is CTranslate2's rule); None: the exact search.
    patience: float | None = None

    def __post_init__(self) -> None:
        if self.patience is not None and (
            isinstance(self.patience, bool)
            or not isinstance(self.patience, int | float)
            or not (math.isfinite(self.patience) and self.patience > 0)
        ):
            raise ValueError(f"decode.patience must be a number > 0 or null, got {self.patience!r}")
        if not 1 <= self.beam_size <= MAX_BEAM_SIZE:
            raise ValueError(
                f"decode.beam_size must be between 1 and {MAX_BEAM_SIZE}, got {self.beam_size}"
            )
        if self.length_penalty < 0:
            raise ValueError(f"decode.length_penalty must be >= 0, got {self.length_penalty}")
        if self.max_len_a <= 0 or self.max_len_b < 0 or self.batch_size < 1:
            raise ValueError(
                f"decode needs max_len_a > 0, max_len_b >= 0, batch_size >= 1; got "
                f"{self.max_len_a}, {self.max_len_b}, {self.batch_size}"
            )

    def max_len(self, source_len: int) -> int:
        return int(self.max_len_a * source_len + self.max_len_b)

    def sizes(self, beam_size: int | None, batch_size: int | None) -> tuple[int, int]:
        """The beam and batch sizes a call asked for, else these defaults; out of range is a
        ``ValueError`` naming the value."""
        beam_size = self.beam_size if beam_size is None else beam_size
        batch_size = self.batch_size if batch_size is None else batch_size
        if not 1 <= beam_size <= MAX_BEAM_SIZE:
            raise ValueError(f"beam_size must be between 1 and {MAX_BEAM_SIZE}, got {beam_size}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return beam_size, batch_size


@dataclass(frozen=True)
class RunConfig:
    """``task`` decides the ``data`` and ``decode`` sections (its
    :attr:`~qkv.tasks.spec.TaskSpec.sections` in :mod:`qkv.tasks.registry`): translation
    (:class:`DataConfig`, :class:`DecodeConfig`), language_model (:class:`LMDataConfig`,
    :class:`SamplingConfig`), classification, tagging or ner (:class:`ClassificationDataConfig`
    / :class:`TaggingDataConfig` / :class:`EntityDataConfig`, :class:`PredictConfig`),
    image_classification
    (:class:`ImageDataConfig`) or captioning (:class:`CaptionDataConfig`, both with
    :class:`PredictConfig`)."""

    name: str
    out_dir: str
    family: str
    model: dict[str, Any]
    data: DataConfig | LMDataConfig | EncoderDataConfig | ImageDataConfig | CaptionDataConfig = (
        field(default_factory=DataConfig)
    )
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig | SamplingConfig | PredictConfig = field(default_factory=DecodeConfig)
    task: str = "translation"

    def section(self, name: Literal["data", "train", "decode"], cls: type[S]) -> S:
        """The ``name`` section as the ``cls`` its task reads (``config.section("data",
        LMDataConfig)``): typed for the caller, and an error naming both classes when the run is
        another task's."""
        value = getattr(self, name)
        if not isinstance(value, cls):
            raise TypeError(
                f"the {name} section of this {self.task} run is a {type(value).__name__}, "
                f"not a {cls.__name__}"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "name": self.name,
            "out_dir": self.out_dir,
            "model": {"family": self.family, **self.model},
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
            "decode": dataclasses.asdict(self.decode),
        }


def _mapping(name: str, values: Any, example: str = "") -> dict[Any, Any]:
    """The section ``name`` (``None``: empty), which must be a mapping."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(
            f"section {name!r} must be a mapping of {name}.KEY: value{example}, got "
            f"{values!r:.60} ({type(values).__name__})"
        )
    return values


def _section(name: str, cls: type, values: Any) -> Any:
    values = _mapping(name, values)
    check_values(cls, values, name)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(_with_suggestion(name, k, known) for k in unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"section {name!r}: {error}") from None


def _with_suggestion(section: str, key: str, known: set[str]) -> str:
    """``train.lr_rate (did you mean train.lr?)`` when a known key is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    close = close or [k for k in sorted(known) if key.startswith(k + "_") or k.startswith(key)][:1]
    return f"{section}.{key}" + (f" (did you mean {section}.{close[0]}?)" if close else "")


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (values parsed as YAML) to a nested dict, in place."""
    import yaml

    for item in overrides:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ValueError(f"--set key {key!r} is not a dotted name such as train.max_minutes")
        node = raw
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {key}: {part!r} is not a section")
        node[parts[-1]] = yaml.safe_load(text)
    return raw


def run_config_from_dict(raw: dict[str, Any], *, default_name: str = "run") -> RunConfig:
    """The run configuration of a parsed YAML (or saved JSON) mapping; every section, key and
    value is checked, and an error names the key and the value."""
    allowed = {"name", "out_dir", "model", "data", "train", "decode", "task"}
    odd = [key for key in raw if not isinstance(key, str)]
    if odd:
        raise ValueError(
            f"top-level key {odd[0]!r} ({type(odd[0]).__name__}) is not a name; the keys are "
            f"{', '.join(sorted(allowed))}"
        )
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(f"unknown top-level key(s) {', '.join(unknown)}; known: {sorted(allowed)}")
    spec = task_spec(raw.get("task", "translation"))
    for key in ("name", "out_dir"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ValueError(f"{key} must be a non-empty string, got {raw[key]!r}")
    family, model = _model_section(raw.get("model"), spec)
    name = raw.get("name", default_name)
    sections = {key: _section(key, cls, raw.get(key)) for key, cls in spec.sections.items()}
    return RunConfig(
        name=name,
        out_dir=raw.get("out_dir", f"runs/{name}"),
        family=family,
        model=model,
        task=spec.name,
        **sections,
    )


def move_saved_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """A saved run's configuration (``config.json``) with the ``model:`` keys its task has moved
    to another section (:attr:`~qkv.tasks.spec.TaskSpec.moved_model_keys`) in their new
    place; runs saved before the move load as they trained."""
    spec = task_spec(raw.get("task", "translation"))
    model = raw.get("model")
    moved = spec.moved_model_keys
    if not isinstance(model, dict) or not set(model) & set(moved):
        return raw
    raw = {**raw, "model": {k: v for k, v in model.items() if k not in moved}}
    for key, place in moved.items():
        if key in model:
            section, name = place.split(".")
            raw[section] = {**(raw.get(section) or {}), name: model[key]}
    return raw


def _check_task_settings(values: Any, spec: TaskSpec) -> None:
    """Refuse a ``train:`` setting of the task's that this task does not read: ``batch_tokens``
    given at all, ``label_smoothing`` other than 0 (what a loss without smoothing does). Checked
    where a person writes the configuration (the YAML file and its ``--set``); a saved
    ``config.json`` holds every key at its default."""
    if not isinstance(values, dict):
        return  # _section names the error
    unread = {
        "batch_tokens": ("batch_tokens" in values, "; the batch size is data.batch_size"),
        "label_smoothing": (values.get("label_smoothing", 0) != 0, "; its loss has no smoothing"),
    }
    for key, (refused, hint) in unread.items():
        if refused and key not in spec.train_settings:
            raise ValueError(
                f"train.{key}: {spec.plural} do not read it (got {values[key]!r}){hint}"
            )


def _model_section(values: Any, spec: TaskSpec) -> tuple[str, dict[str, Any]]:
    """The family and the other keys of the ``model`` section: a family that the task trains,
    every key one its config or the task reads (a typo is an error naming the key, before any
    data is loaded), each value of the type asked for (sizes and ranges are checked when the
    config is built, once the data has decided the vocabulary)."""
    families = " or ".join(spec.families)
    values = _mapping("model", values, f" (model.family: {families}, sizes...)")
    family = values.get("family")
    if family is None:
        raise ValueError(f"model.family is required ({families})")
    if not isinstance(family, str) or family not in spec.families:
        raise ValueError(f"model.family of a {spec.name} run must be {families}, got {family!r}")
    model = {key: value for key, value in values.items() if key != "family"}
    moved = sorted(set(model) & set(spec.moved_model_keys))
    if moved:
        raise ValueError(
            f"model.{moved[0]} is now {spec.moved_model_keys[moved[0]]} (a weight of the loss, "
            "not of the model)"
        )
    check_model_values(family, model, extra=spec.model_keys)
    return family, model


def load_run_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run configuration and apply ``--set`` overrides."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no configuration file {path}")
    text = decode_utf8(path, path.read_bytes())
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping at the top level")
    raw = apply_overrides(raw, overrides or [])
    config = run_config_from_dict(raw, default_name=path.stem)
    _check_task_settings(raw.get("train"), task_spec(config.task))
    return config

"""Named presets of every model family, in one table: ``PRESETS[family][name]``.

A preset is a set of flat config values (the keys of a model section) that leaves out what the
task decides from its data (vocabulary sizes, label counts, image sizes). Three ways in, one
expansion:

* a run configuration's model section, ``preset: tiny`` beside explicit keys:
  :func:`with_preset` (the explicit keys win);
* a config class: ``TransformerLMConfig.preset("tiny", vocab_size)``, from :class:`Presets`,
  which every config with presets inherits (its sizes positional, in the order it declares);
* the values alone: :func:`preset_values`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from qkv.config_values import config_from_flat

__all__ = ["PRESETS", "Presets", "preset_values", "with_preset"]

# Show-Attend-Tell's two MNIST presets differ only in their attention.
_SAT_MNIST = dict(
    conv_channels=(32, 64),
    region_layers=2,
    feature_dim=128,
    embed_dim=64,
    hidden_dim=256,
    attention_dim=128,
    dropout=0.3,
)
PRESETS: dict[str, dict[str, dict[str, object]]] = {
    # all-MiniLM-L6-v2's encoder (Wang et al. 2020, "MiniLM"), BERT base, a test size.
    "bert": {
        "tiny": dict(
            vocab_size=128,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
        ),
        "minilm-l6": dict(
            vocab_size=30522,
            hidden_size=384,
            num_layers=6,
            num_heads=12,
            intermediate_size=1536,
            max_position_embeddings=512,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
        ),
        "bert-base": dict(
            vocab_size=30522,
            hidden_size=768,
            num_layers=12,
            num_heads=12,
            intermediate_size=3072,
            max_position_embeddings=512,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
        ),
    },
    # The vocabulary and the labels come from the task.
    "encoder_classifier": {
        "tiny": dict(
            d_model=32,
            num_heads=2,
            num_layers=1,
            d_ff=64,
            dropout=0.0,
            max_len=64,
            pooling="mean",
            hops=2,
            attention_dim=16,
        ),
        "transformer-small": dict(
            d_model=256,
            num_heads=4,
            num_layers=4,
            d_ff=1024,
            max_len=512,
            pooling="cls",
        ),
        # Lin et al. 2017's sizes: u = 300 units per direction, d_a = 350, r = 30. Their penalty
        # coefficient, 1, is the classification task's default for structured pooling
        # (train.penalty_weight), a weight of the loss and not of the model.
        "bilstm-attention": dict(
            encoder="bilstm",
            d_model=600,
            num_layers=1,
            dropout=0.5,
            max_len=1024,
            pooling="structured",
            hops=30,
            attention_dim=350,
        ),
    },
    # The vocabulary and the tag set come from the task.
    "sequence_tagger": {
        "tiny": dict(d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0, max_len=64),
        "transformer-small": dict(d_model=256, num_heads=4, num_layers=4, d_ff=1024, max_len=512),
        # A BiLSTM tagger of Huang et al. 2015's size (300 units per direction), no CRF.
        "bilstm": dict(encoder="bilstm", d_model=600, num_layers=1, dropout=0.5, max_len=1024),
        "bilstm-attention": dict(
            encoder="bilstm",
            d_model=600,
            num_layers=1,
            dropout=0.5,
            max_len=1024,
            self_attention=True,
            num_heads=6,
        ),
    },
    # Cloze readers (Hermann et al. 2015, Chen et al. 2016, Kadlec et al. 2016); `reader` picks
    # one. "small" is CBT-like in shape but sized for a CPU; the vocabulary comes from the task.
    "cloze_reader": {
        "tiny": dict(embed_dim=16, hidden_dim=16, attention_dim=16, dropout=0.0),
        "small": dict(embed_dim=128, hidden_dim=128, attention_dim=128, dropout=0.1),
    },
    # DrQA's document reader (Chen et al. 2017) at a CPU size; the vocabulary comes from the task.
    "span_reader": {
        "tiny": dict(embed_dim=16, hidden_dim=16, num_layers=1, dropout=0.0),
        "small": dict(embed_dim=128, hidden_dim=128, num_layers=2, dropout=0.2),
    },
    # A span reader on a Transformer encoder over a BPE (a pretrained MiniLM needs no preset:
    # `pretrained: minilm`); the vocabulary comes from the task.
    "encoder_span_reader": {
        "tiny": dict(
            d_model=32,
            num_heads=2,
            num_layers=2,
            d_ff=64,
            dropout=0.0,
            max_len=128,
            positions="sinusoidal",
        ),
        "transformer-small": dict(
            d_model=256,
            num_heads=4,
            num_layers=4,
            d_ff=1024,
            max_len=512,
            positions="sinusoidal",
        ),
    },
    # From a CI-sized model to GPT-2 small; the vocabulary comes from the tokenizer.
    "transformer_lm": {
        "tiny": dict(d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=256, dropout=0.0),
        "char-small": dict(d_model=256, num_heads=4, num_layers=4, d_ff=1024, max_len=256),
        "small": dict(d_model=384, num_heads=6, num_layers=6, d_ff=1536, max_len=512),
        "gpt2-small": dict(d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=1024),
    },
    # Show-Attend-Tell on MNIST strips with soft or hard attention, and a CI-sized model (the
    # weights of the loss are the run's: configs/caption/mnist-hard.yaml sets its REINFORCE one).
    "show_attend_tell": {
        "mnist-soft": dict(**_SAT_MNIST, attention="soft"),
        "mnist-hard": dict(**_SAT_MNIST, attention="hard"),
        "tiny": dict(
            conv_channels=(8, 16),
            region_layers=1,
            feature_dim=32,
            embed_dim=16,
            hidden_dim=32,
            attention_dim=32,
            dropout=0.0,
        ),
    },
    # ViT-B/16 (Dosovitskiy et al. 2021, table 1), an MNIST-sized model, a test size.
    "vit": {
        "vit-b16": dict(
            image_size=224,
            patch_size=16,
            num_channels=3,
            hidden_size=768,
            num_layers=12,
            num_heads=12,
            intermediate_size=3072,
            num_labels=1000,
        ),
        "tiny-mnist": dict(
            image_size=28,
            patch_size=7,
            num_channels=1,
            hidden_size=64,
            num_layers=4,
            num_heads=4,
            intermediate_size=128,
            num_labels=10,
            dropout=0.1,
        ),
        "tiny": dict(
            image_size=16,
            patch_size=4,
            num_channels=3,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            intermediate_size=64,
            num_labels=5,
        ),
    },
}


def preset_values(family: str, name: object, *, key: str = "preset") -> dict[str, object]:
    """A copy of the values of preset ``name`` of ``family``.

    Raises:
        ValueError: ``unknown {key} 'x'; known: tiny, small`` (``key`` names where the name
            came from: ``preset``, ``model.preset``).
    """
    table = PRESETS.get(family, {})
    if not isinstance(name, str) or name not in table:
        raise ValueError(f"unknown {key} {name!r}; known: {', '.join(table)}")
    return dict(table[name])


def with_preset(family: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A model section with its ``preset`` key expanded: the preset's values under the
    section's own (which win); without ``preset``, a copy of the section."""
    values = dict(values)
    name = values.pop("preset", None)
    if name is None:
        return values
    return {**preset_values(family, name, key="model.preset"), **values}


ConfigT = TypeVar("ConfigT", bound="Presets")


class Presets:
    """The ``preset()`` constructor and ``PRESETS`` (this family's part of the table) of a
    config class: ``class ViTConfig(Presets, family="vit")``; ``sizes`` names, in order, the
    values the presets leave to the task (``sizes=("vocab_size",)``), given positionally."""

    _family: str = ""  # all three set by __init_subclass__
    _sizes: tuple[str, ...] = ()
    PRESETS: ClassVar[dict[str, dict[str, object]]]

    def __init_subclass__(
        cls, *, family: str | None = None, sizes: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if family is not None:
            cls._family, cls._sizes = family, sizes
            cls.PRESETS = PRESETS[family]

    @classmethod
    def preset(cls: type[ConfigT], name: str, *sizes: object, **overrides: object) -> ConfigT:
        """The config of preset ``name``: its values, the task's ``sizes`` (the class's, in
        order: a classifier's ``vocab_size, num_labels``) and ``overrides`` on top."""
        if len(sizes) > len(cls._sizes):
            raise TypeError(
                f"{cls.__name__}.preset takes {len(cls._sizes)} size(s) after the name "
                f"({', '.join(cls._sizes) or 'none'}), got {len(sizes)}"
            )
        given: dict[str, object] = dict(zip(cls._sizes, sizes, strict=False))
        twice = sorted(set(given) & set(overrides))
        if twice:
            raise TypeError(f"{cls.__name__}.preset got {', '.join(twice)} twice")
        values = {**preset_values(cls._family, name), **given, **overrides}
        return config_from_flat(cls, values)

"""A trained model directory as a CTranslate2 model directory (``qkv export --format
ctranslate2``), which alone translates or generates text with qkv's tokenizers:

    OUT/model.bin                    the weights (float32, or quantized)
    OUT/config.json                  CTranslate2's configuration (special tokens, epsilon)
    OUT/shared_vocabulary.json       qkv's vocabulary in id order (source_ and
                                     target_vocabulary.json when they differ; a language
                                     model's vocabulary.json)
    OUT/qkv/config.json              the qkv run configuration (lengths, decoding settings)
    OUT/qkv/*tokenizer.json          qkv's tokenizers
    OUT/qkv/export.json              what was exported: format, quantization, position table,
                                     and the size and SHA-256 of every other file above
                                     (``"files"``, :mod:`qkv.manifest`), checked on load

A task says whether and how its models export with ``TaskSpec.export_ctranslate2``: the
translation task's Transformers (:func:`export_translation`) and the language models
(:func:`export_language_model`). :func:`export_model` asks the model directory's task; what
:mod:`qkv.ctranslate2.convert` cannot represent exactly is refused there, naming it. The export is
written to a temporary directory and renamed into place, so OUT is whole or absent.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkv.ctranslate2.convert import (
    SpecialTokens,
    check_output_dir,
    check_quantization,
    ctranslate2_module,
    language_model_spec,
    save_spec,
    transformer_spec,
)
from qkv.data.tokens.chars import CharTokenizer
from qkv.data.tokens.special import (
    BOS_ID,
    BOS_TOKEN,
    EOS_ID,
    EOS_TOKEN,
    SPECIAL_TOKENS,
    UNK_ID,
    UNK_TOKEN,
)
from qkv.io import atomic_write_json
from qkv.manifest import entries_to_json, record_files
from qkv.tasks.input_checks import HARD_LIMIT_FACTOR
from qkv.tasks.registry import tasks
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    EXPORT_DIR,
    EXPORT_FILE,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    TOKENIZER_FILE,
    load_model_run_config,
    model_task,
)
from qkv.tasks.translation.config import DataConfig, DecodeConfig

FORMATS = ("ctranslate2",)
QKV_DIR = EXPORT_DIR  # OUT/qkv: qkv's own files beside the CTranslate2 model (and EXPORT_FILE)
SPECIAL = SpecialTokens(bos=BOS_TOKEN, eos=EOS_TOKEN, unk=UNK_TOKEN)


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the directory and its files (relative paths, sorted)."""

    out: Path
    files: list[str]
    quantization: str | None


def export_model(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    format: str = "ctranslate2",
    quantization: str | None = None,
    overwrite: bool = False,
) -> Exported:
    """Export the trained model in ``model_dir`` to ``out_dir`` as its task's
    ``export_ctranslate2`` does; a task without one is refused, naming the tasks that have one.

    Args:
        format: ``"ctranslate2"`` (the one format).
        quantization: ``None`` (float32), ``"int8"``, ``"int8_float32"`` or ``"int16"``.
        overwrite: replace an existing non-empty ``out_dir`` (refused otherwise).
    """
    if format not in FORMATS:
        raise ValueError(f"format must be {' or '.join(FORMATS)}, got {format!r}")
    check_quantization(quantization)
    out = check_output_dir(out_dir, overwrite=overwrite)
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"no model directory at {model_dir}")
    source, target = model_dir.resolve(), out.resolve()
    if target == source or target in source.parents:
        raise ValueError(
            f"the output {out} would replace the model directory {model_dir}; choose another"
        )
    spec = model_task(model_dir)
    if spec.export_ctranslate2 is None:
        exportable = " and ".join(t.plural for t in tasks() if t.export_ctranslate2 is not None)
        raise ValueError(
            f"{model_dir} holds a {spec.label}: {spec.plural} cannot be exported to CTranslate2 "
            f"(only {exportable} can)"
        )
    ctranslate2_module()  # a missing package is said before any model is loaded
    return spec.export_ctranslate2(model_dir, out, quantization=quantization, overwrite=overwrite)


def token_strings(tokenizer: Any) -> list[str]:
    """Each id's token string, in id order (CTranslate2's vocabulary); the special tokens of
    :mod:`qkv.data.tokens.special` at their ids."""
    if isinstance(tokenizer, CharTokenizer):
        tokens = [*SPECIAL_TOKENS, *tokenizer.chars]
    else:
        tokens = tokenizer.pieces(range(tokenizer.vocab_size))
    for index, token in ((BOS_ID, BOS_TOKEN), (EOS_ID, EOS_TOKEN), (UNK_ID, UNK_TOKEN)):
        if tokens[index] != token:
            raise ValueError(f"the tokenizer has {tokens[index]!r} at id {index}, not {token!r}")
    return tokens


def translation_positions(max_len: int, decode: DecodeConfig) -> int:
    """Rows of the position table a translation model needs: sources of up to the hard limit,
    ``HARD_LIMIT_FACTOR * max_len`` tokens plus EOS (what :class:`.Translator` takes), and
    outputs of up to ``decode.max_len`` of such a source, plus the step that ends them."""
    longest_source = HARD_LIMIT_FACTOR * max_len + 1
    return max(longest_source, decode.max_len(longest_source) + 1)


def export_translation(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    quantization: str | None = None,
    overwrite: bool = False,
) -> Exported:
    """Export a translation model directory (family ``transformer``, not copying) to
    ``out_dir``; the recurrent families and copying models are refused before any weight is
    read."""
    from qkv.tasks.translation.runner import Translator  # each task's runner only when it exports

    model_dir = Path(model_dir)
    run = load_model_run_config(model_dir, verify=(CONFIG_FILE,))  # Translator.load: the rest
    if run.family != "transformer":
        raise ValueError(
            f"{model_dir} holds a {run.family} model: CTranslate2 has no recurrent "
            "encoder-decoder; only family transformer can be exported"
        )
    if run.model.get("copy"):
        raise ValueError(
            f"{model_dir} holds a copying model (copy: true): CTranslate2 has no copy attention "
            "or extended vocabulary, so the pointer-generator cannot be exported"
        )
    translator = Translator.load(model_dir)  # checks the run's files (its manifest)
    data, decode = run.section("data", DataConfig), run.section("decode", DecodeConfig)
    positions = translation_positions(data.max_len, decode)
    spec = transformer_spec(
        translator.model,
        token_strings(translator.source_tokenizer),
        token_strings(translator.target_tokenizer),
        special=SPECIAL,
        positions=positions,
    )
    files = (CONFIG_FILE, SOURCE_TOKENIZER, TARGET_TOKENIZER)
    return _save(spec, model_dir, out_dir, files, quantization, overwrite, positions=positions)


def export_language_model(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    quantization: str | None = None,
    overwrite: bool = False,
) -> Exported:
    """Export a language model directory to ``out_dir`` (learned or rotary positions, any
    number of key/value heads)."""
    from qkv.tasks.language_model.runner import LanguageModel

    model_dir = Path(model_dir)
    lm = LanguageModel.load(model_dir)
    spec = language_model_spec(lm.model, token_strings(lm.tokenizer), special=SPECIAL)
    files = (CONFIG_FILE, TOKENIZER_FILE)
    return _save(spec, model_dir, out_dir, files, quantization, overwrite)


def _save(
    spec: Any,
    model_dir: Path,
    out_dir: str | Path,
    files: Sequence[str],
    quantization: str | None,
    overwrite: bool,
    **record: Any,
) -> Exported:
    def add_qkv_files(directory: Path) -> None:
        (directory / QKV_DIR).mkdir()
        for name in files:
            shutil.copyfile(model_dir / name, directory / QKV_DIR / name)
        # Last, what was exported: every file written (CTranslate2's and qkv's), so that a file
        # swapped, truncated or edited later is refused by name when the export is loaded.
        names = [p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()]
        exported = entries_to_json(record_files(directory, names))
        atomic_write_json(
            directory / QKV_DIR / EXPORT_FILE,
            {"format": "ctranslate2", "quantization": quantization, "files": exported, **record},
        )

    out = save_spec(
        spec, out_dir, quantization=quantization, overwrite=overwrite, extra=add_qkv_files
    )
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    return Exported(out, written, quantization)

"""Exported CTranslate2 models (:mod:`qkv.ctranslate2.export`) run with qkv's tokenizers,
input checks and decoding rules, so that they give the outputs qkv's own runners give:
:class:`CTranslate2Translator` (:class:`~qkv.tasks.translation.runner.Translator`'s translations,
through
:func:`~qkv.ctranslate2.search.search_tokens`: each sentence's own length limit, beam
hypotheses ranked by qkv's GNMT penalty) and :class:`CTranslate2Generator`
(:class:`~qkv.tasks.language_model.runner.LanguageModel`'s greedy continuations).

Each directory is read with its qkv files (``OUT/qkv/``) and refused, naming the file, when they
do not belong together: a file whose size or SHA-256 is not the one ``qkv/export.json`` recorded
(another export's ``model.bin``, a truncated one, an edited vocabulary), another task's export,
or a tokenizer whose vocabulary is not the one CTranslate2 was given. An export made before qkv
recorded its files is refused with a message saying to export it again (quick, from
the run directory), rather than trusted; a qkv run directory is refused with ``--engine qkv``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from qkv.ctranslate2.convert import ctranslate2_module
from qkv.ctranslate2.export import EXPORT_FILE, QKV_DIR, token_strings
from qkv.ctranslate2.search import Hypothesis, search_tokens
from qkv.data.tokens.subword import SubwordTokenizer
from qkv.decoding.sampling import SamplingConfig
from qkv.manifest import check_files, entries_from_json
from qkv.models.registry import build_config
from qkv.tasks.input_checks import (
    InputWarning,
    LengthLimits,
    longest_token,
    one_text,
    text_list,
)
from qkv.tasks.language_model.config import LMDataConfig
from qkv.tasks.language_model.inputs import Tokenizer, load_tokenizer
from qkv.tasks.language_model.runner import prompt_ids
from qkv.tasks.language_model.task import TASK as LANGUAGE_MODEL
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    EXPORT_WEIGHTS,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    TOKENIZER_FILE,
    is_ctranslate2_export,
    load_model_run_config,
)
from qkv.tasks.translation.config import DataConfig, DecodeConfig
from qkv.tasks.translation.inputs import source_ids
from qkv.tasks.translation.task import TASK as TRANSLATION

__all__ = ["CTranslate2Generator", "CTranslate2Translator", "check_export"]


def check_export(directory: str | Path) -> Path:
    """``directory`` if it holds a CTranslate2 export (its files are checked on load); a qkv run
    directory, or no model, is refused, naming what to pass."""
    directory = Path(directory)
    if is_ctranslate2_export(directory):
        return directory
    if (directory / CONFIG_FILE).is_file() and not (directory / EXPORT_WEIGHTS).is_file():
        raise ValueError(
            f"{directory} is a qkv run directory, not a CTranslate2 export: pass --engine qkv, "
            f"or export it first with qkv export --format ctranslate2 --model {directory} "
            "-o OUT and pass OUT"
        )
    raise FileNotFoundError(
        f"no exported CTranslate2 model at {directory} ({EXPORT_WEIGHTS} and {QKV_DIR}/"
        f"{EXPORT_FILE} are written by qkv export --format ctranslate2)"
    )


def _read_export(directory: str | Path, task: str) -> tuple[Path, RunConfig, dict[str, Any]]:
    """The exported directory, its qkv run configuration and export record, once every file the
    record lists is checked (size and SHA-256); errors name the file and what to pass instead."""
    directory = check_export(directory)
    own = directory / QKV_DIR
    again = (
        "export the model again (qkv export --format ctranslate2 --model RUN_DIR -o "
        f"{directory} --overwrite)"
    )
    try:
        record = json.loads((own / EXPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{own / EXPORT_FILE} is not readable JSON: {error}; {again}") from None
    if not isinstance(record, dict) or "files" not in record:
        raise ValueError(
            f"{own / EXPORT_FILE} records no size and SHA-256 of the exported files (an export "
            f"made before qkv checked them): {again}"
        )
    files = entries_from_json(record["files"], own / EXPORT_FILE)
    check_files(directory, files, listed_in=f"{QKV_DIR}/{EXPORT_FILE}",
                remedy=f"{again}, or restore the file")  # fmt: skip
    run = load_model_run_config(own)
    if run.task != task:
        raise ValueError(
            f"{directory} holds an exported {run.task} model, not a {task} model: pass an export "
            f"of a {task} model, or the {run.task} model's run directory with --engine qkv"
        )
    return directory, run, record


def _check_vocabulary(path: Path, tokens: list[str], tokenizer_file: Path) -> None:
    """Refuse a CTranslate2 vocabulary that is not the tokenizer's (files mixed up)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not a readable vocabulary: {error}") from None
    if saved != tokens:
        raise ValueError(
            f"{path} is not the vocabulary of {tokenizer_file}: keep the files of an exported "
            "model together (or export it again)"
        )


class _Engines:
    """One CTranslate2 model object per compute type, loaded on first use."""

    def __init__(self, kind: str, directory: Path, device: str, threads: int) -> None:
        self.kind = kind  # "Translator" or "Generator"
        self.directory, self.device, self.threads = directory, device, threads
        self.loaded: dict[str, Any] = {}

    def get(self, compute_type: str) -> Any:
        if compute_type not in self.loaded:
            cls = getattr(ctranslate2_module(), self.kind)
            self.loaded[compute_type] = cls(
                str(self.directory),
                device=self.device,
                compute_type=compute_type,
                intra_threads=self.threads,
            )
        return self.loaded[compute_type]


class CTranslate2Translator:
    """An exported translation model run by CTranslate2: texts in, the translations qkv's
    :class:`~qkv.tasks.translation.runner.Translator` gives out (the same length checks, warnings
    and
    decoding rules; :mod:`qkv.ctranslate2.search` says how beam search with a length
    penalty is matched, and how closely).

    Build one with :meth:`load`. ``compute_type`` is CTranslate2's (``"default"``: the type the
    weights were saved in; ``"int8"``, ``"int16"``, ``"float32"``); each one asked for is
    loaded once and kept.
    """

    def __init__(
        self,
        engines: _Engines,
        source_tokenizer: SubwordTokenizer,
        target_tokenizer: SubwordTokenizer,
        run: RunConfig,
        *,
        positions: int,
        compute_type: str = "default",
    ) -> None:
        self._engines = engines
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.decode = run.section("decode", DecodeConfig)
        self.limits = LengthLimits.without_table(run.section("data", DataConfig).max_len)
        self.positions, self.compute_type = positions, compute_type
        model = build_config(run.family, run.model)  # what the attention CTranslate2 returns is of
        self.layers, self.heads = model.num_decoder_layers, model.num_heads
        self._source_tokens = token_strings(source_tokenizer)
        self._target_ids = {token: i for i, token in enumerate(token_strings(target_tokenizer))}

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        device: str = "cpu",
        compute_type: str = "default",
        threads: int = 0,
    ) -> CTranslate2Translator:
        """Load a directory written by :func:`~qkv.ctranslate2.export.export_translation`
        (``threads``: CTranslate2's threads per call, 0 for its default)."""
        directory, run, record = _read_export(directory, TRANSLATION.name)
        own = directory / QKV_DIR
        source = SubwordTokenizer.load(own / SOURCE_TOKENIZER)
        target = SubwordTokenizer.load(own / TARGET_TOKENIZER)
        shared = directory / "shared_vocabulary.json"
        for tokenizer, file, name in ((source, SOURCE_TOKENIZER, "source"),
                                      (target, TARGET_TOKENIZER, "target")):  # fmt: skip
            vocabulary = shared if shared.is_file() else directory / f"{name}_vocabulary.json"
            _check_vocabulary(vocabulary, token_strings(tokenizer), own / file)
        positions = record.get("positions")
        if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
            raise ValueError(f"{own / EXPORT_FILE}: positions must be an int >= 1")
        engines = _Engines("Translator", directory, device, threads)
        translator = cls(
            engines, source, target, run, positions=positions, compute_type=compute_type
        )
        engines.get(compute_type)  # a model CTranslate2 cannot read fails here, not later
        return translator

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.source_tokenizer)

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        batch_size: int | None = None,
        compute_type: str | None = None,
    ) -> list[str]:
        """Translate ``texts`` (a list of str; greedy when ``beam_size`` is 1, default: the
        model's ``decode.beam_size``); returns the text of each translation."""
        sizes = self.decode.sizes(beam_size, batch_size)
        ids = self._encode(texts)
        out = self._translate(ids, *sizes, compute_type)
        return [self.target_tokenizer.decode(row) for row in out]

    def translate_ids(
        self,
        texts: Sequence[str],
        *,
        beam_size: int | None = None,
        batch_size: int | None = None,
        compute_type: str | None = None,
    ) -> list[list[int]]:
        """As :meth:`translate`, the output token ids (EOS excluded) instead of text."""
        sizes = self.decode.sizes(beam_size, batch_size)
        ids = self._encode(texts)
        return self._translate(ids, *sizes, compute_type)

    def attended(
        self, text: str, *, beam_size: int | None = None
    ) -> tuple[list[int], list[int], Hypothesis]:
        """Translate one ``text`` as :meth:`translate` does, asking CTranslate2 for its attention
        (``return_attention``): the source ids (without the EOS CTranslate2 appends), the output
        ids (EOS excluded) and the search's
        :class:`~qkv.ctranslate2.search.Hypothesis` (``ended``, ``attention``)."""
        text = one_text(text, several="translate(texts)")
        beam_size, _ = self.decode.sizes(beam_size, None)
        (ids,) = self._encode([text])
        (found,) = self._search([ids], beam_size, 1, None, attention=True)
        return ids, [self._target_ids[token] for token in found.tokens], found

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Source ids (EOS not added: the exported model adds it) after the checks
        :class:`~qkv.tasks.translation.runner.Translator` makes."""
        texts = text_list(texts)
        return source_ids(
            texts, self.source_tokenizer, self.limits, longest=self._longest_token, stacklevel=5
        )

    def _translate(
        self, ids: list[list[int]], beam_size: int, batch_size: int, compute_type: str | None
    ) -> list[list[int]]:
        found = self._search(ids, beam_size, batch_size, compute_type)
        return [[self._target_ids[token] for token in row.tokens] for row in found]

    def _search(
        self,
        ids: list[list[int]],
        beam_size: int,
        batch_size: int,
        compute_type: str | None,
        *,
        attention: bool = False,
    ) -> list[Hypothesis]:
        limits = [self.decode.max_len(len(row) + 1) for row in ids]  # the source EOS counted
        for row, limit in zip(ids, limits, strict=True):
            if max(len(row) + 1, limit + 1) > self.positions:
                raise ValueError(
                    f"a source of {len(row) + 1} tokens (output limit {limit}) needs more "
                    f"positions than the {self.positions} this export holds; export the model "
                    "again or shorten the text"
                )
        return search_tokens(
            self._engines.get(compute_type or self.compute_type),
            [[self._source_tokens[i] for i in row] for row in ids],
            beam_size=beam_size,
            max_len=limits,
            length_penalty=self.decode.length_penalty,
            batch_size=batch_size,
            attention=attention,
        )


class CTranslate2Generator:
    """An exported language model run by CTranslate2: prompts in, the greedy continuation
    qkv's :class:`~qkv.tasks.language_model.runner.LanguageModel` gives out (``temperature=0``).

    qkv slides its window past ``max_len`` tokens; CTranslate2 cannot, so a prompt and its new
    tokens must fit ``max_len`` (more is a ``ValueError`` saying how many fit). Build one with
    :meth:`load`; ``compute_type`` as for :class:`CTranslate2Translator`.
    """

    def __init__(
        self, engines: _Engines, tokenizer: Tokenizer, run: RunConfig, *, compute_type: str
    ) -> None:
        self._engines, self.tokenizer, self.compute_type = engines, tokenizer, compute_type
        self.sampling = run.section("decode", SamplingConfig)
        self.block_size = run.section("data", LMDataConfig).block_size
        self.max_len = build_config(run.family, run.model).max_len
        self._tokens = token_strings(tokenizer)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        device: str = "cpu",
        compute_type: str = "default",
        threads: int = 0,
    ) -> CTranslate2Generator:
        """Load a directory written by
        :func:`~qkv.ctranslate2.export.export_language_model`."""
        directory, run, _ = _read_export(directory, LANGUAGE_MODEL.name)
        own = directory / QKV_DIR
        tokenizer = load_tokenizer(own / TOKENIZER_FILE)
        _check_vocabulary(
            directory / "vocabulary.json", token_strings(tokenizer), own / TOKENIZER_FILE
        )
        engines = _Engines("Generator", directory, device, threads)
        generator = cls(engines, tokenizer, run, compute_type=compute_type)
        engines.get(compute_type)
        return generator

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.tokenizer)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        batch_size: int = 32,
        compute_type: str | None = None,
    ) -> list[str]:
        """Continue each prompt greedily by up to ``max_new_tokens`` tokens (default: the
        model's ``decode.max_new_tokens``), stopping at EOS; returns the new text."""
        ids = self._encode(prompts)
        out = self._generate(ids, max_new_tokens, batch_size, compute_type)
        return [self.tokenizer.decode(row) for row in out]

    def generate_ids(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        batch_size: int = 32,
        compute_type: str | None = None,
    ) -> list[list[int]]:
        """As :meth:`generate`, the new token ids (EOS excluded) instead of text."""
        ids = self._encode(prompts)
        return self._generate(ids, max_new_tokens, batch_size, compute_type)

    def _encode(self, prompts: Sequence[str]) -> list[list[int]]:
        """The ids of each prompt (an empty one starts from a newline), checked as
        :class:`~qkv.tasks.language_model.runner.LanguageModel` checks them."""
        prompts = text_list(prompts, "prompts")
        return prompt_ids(
            prompts, self.tokenizer, LengthLimits(self.block_size, self.max_len - 1),
            max_len=self.max_len, room=1, longest=self._longest_token,
            consequence="continuing from positions it was never trained on, the model may go "
            "astray", item="prompt", stacklevel=5,
        )  # fmt: skip

    def _generate(
        self,
        ids: list[list[int]],
        max_new_tokens: int | None,
        batch_size: int,
        compute_type: str | None,
    ) -> list[list[int]]:
        new = self.sampling.max_new_tokens if max_new_tokens is None else max_new_tokens
        SamplingConfig(max_new_tokens=new)  # the same range check as qkv's
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not ids:
            return []
        longest = max(len(row) for row in ids)
        if longest + new - 1 > self.max_len:
            raise ValueError(
                f"the longest prompt has {longest} tokens and max_new_tokens is {new}, but "
                f"CTranslate2 reads at most max_len={self.max_len} positions (it has no sliding "
                f"window); ask for at most {self.max_len - longest + 1} new tokens"
            )
        if longest <= self.block_size < longest + new:
            warnings.warn(
                f"the longest prompt ({longest:,} tokens) plus max_new_tokens={new:,} reaches "
                f"{longest + new:,} tokens, more than the {self.block_size:,} this model was "
                f"trained on (data.block_size): positions {self.block_size}..{longest + new - 1} "
                "were never trained",
                InputWarning,
                stacklevel=3,
            )
        # With the prompt in the result, CTranslate2 feeds every prompt whole (its positions
        # as qkv's) and counts the steps after each prompt's first token: the longest prompt
        # gets `new` tokens, shorter ones more, cut to `new` below (greedy: the same tokens).
        results = self._engines.get(compute_type or self.compute_type).generate_batch(
            [[self._tokens[i] for i in row] for row in ids],
            max_length=longest - 1 + new,
            sampling_topk=1,
            beam_size=1,
            include_prompt_in_result=True,
            return_end_token=False,
            max_batch_size=batch_size,
        )
        out = []
        for row, result in zip(ids, results, strict=True):
            out.append(list(result.sequences_ids[0][len(row) : len(row) + new]))
        return out

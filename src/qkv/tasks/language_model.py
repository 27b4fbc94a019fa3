"""Language modelling end to end: train a decoder-only Transformer on a text corpus, generate
from it, and score it (perplexity; bits per character).

A trained model directory holds ``config.json`` (with ``task: language_model``),
``model.safetensors`` (the best weights by validation loss), ``tokenizer.json`` (a character
vocabulary or a byte-level BPE), ``metrics.csv`` and the run's checkpoints.

Training reads the corpus as one stream of token ids cut into windows of ``block_size + 1``
tokens (inputs and next-token targets); each epoch starts the windows at a different offset and
shuffles them, both a pure function of ``(seed, epoch)``, so a resumed run sees the same data.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.char_tokenizer import CharTokenizer, is_char_vocabulary
from qkv.data.text_corpus import load_text_corpus
from qkv.data.tokenizer import SubwordTokenizer, check_vocab_size
from qkv.data.vocab import EOS_ID, PAD_ID, UNK_ID
from qkv.decoding.sampling import Generation, SamplingConfig, generate
from qkv.io import atomic_write_json
from qkv.models.language_model import PRESETS, TransformerLM
from qkv.models.registry import build_config, build_model, config_to_dict
from qkv.tasks.input_checks import (
    InputWarning,
    LengthLimits,
    check_lengths,
    longest_token,
    one_text,
    refuse_absurd,
    text_list,
)
from qkv.tasks.run_config import LMDataConfig, RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    claim_run_dir,
    load_model_run_config,
)
from qkv.training.checkpoint import load_weights, save_weights
from qkv.training.distributed import Distributed
from qkv.training.trainer import TrainResult, train, training_device

logger = logging.getLogger(__name__)

Tokenizer = CharTokenizer | SubwordTokenizer


@dataclass(frozen=True)
class LMBatch:
    """``inputs (B, T)`` and their next tokens ``targets (B, T)``."""

    inputs: Tensor
    targets: Tensor

    def to(self, device: torch.device | str) -> LMBatch:
        return LMBatch(self.inputs.to(device), self.targets.to(device))


def lm_batches(
    ids: Tensor,
    *,
    block_size: int,
    batch_size: int,
    seed: int = 0,
    epoch: int = 0,
    start: int = 0,
    shuffle: bool = True,
) -> Iterator[LMBatch]:
    """The batches of one epoch over the token stream ``ids (N,)``, skipping the first
    ``start``. Windows of ``block_size + 1`` tokens do not overlap; with ``shuffle`` their
    offset and order come from ``numpy.random.default_rng([seed, epoch])``."""
    span = block_size + 1
    if ids.numel() < span:
        raise ValueError(
            f"the text has {ids.numel()} tokens, fewer than one window of block_size + 1 = {span}"
        )
    rng = np.random.default_rng([seed, epoch])
    offset = int(rng.integers(0, block_size)) if shuffle else 0
    count = (ids.numel() - offset) // span
    starts = offset + span * np.arange(count)
    if shuffle:
        starts = rng.permutation(starts)
    windows = torch.as_tensor(starts)
    for first in range(start * batch_size, count, batch_size):
        chunk = windows[first : first + batch_size]
        rows = torch.stack([ids[s : s + span] for s in chunk.tolist()])  # (B, T + 1)
        yield LMBatch(rows[:, :-1], rows[:, 1:])


def lm_loss(model: nn.Module, batch: LMBatch) -> tuple[Tensor, Tensor]:
    """Summed next-token cross-entropy (nats) and the number of predicted tokens."""
    logits = model(batch.inputs).logits  # (B, T, V)
    loss = F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), reduction="sum")
    return loss, torch.tensor(batch.targets.numel())


def train_tokenizer(data: LMDataConfig, text: str) -> Tokenizer:
    if data.tokenizer == "char":
        return CharTokenizer.train(text)
    return SubwordTokenizer.train(text.splitlines(keepends=True), data.vocab_size, byte_level=True)


def load_tokenizer(path: Path) -> Tokenizer:
    return CharTokenizer.load(path) if is_char_vocabulary(path) else SubwordTokenizer.load(path)


def model_values(model: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """The model section with its ``preset`` expanded and the tokenizer's vocabulary size."""
    values = dict(model)
    preset = values.pop("preset", None)
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"unknown model.preset {preset!r}; known: {', '.join(PRESETS)}")
        values = {**PRESETS[preset], **values}
    return {**values, "vocab_size": vocab_size}


@dataclass(frozen=True)
class TrainedLM:
    model_dir: Path
    result: TrainResult
    parameters: int


def train_language_model(
    config: RunConfig,
    *,
    progress: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    handle_signals: bool = False,
    distributed: Distributed | None = None,
) -> TrainedLM:
    """Train ``config``'s language model on its corpus; the best weights (by validation loss)
    go to ``config.out_dir``. Arguments as :func:`qkv.tasks.translation.train_translation`."""
    if config.task != "language_model":
        raise ValueError(f"train_language_model needs task language_model, got {config.task!r}")
    data: LMDataConfig = config.data  # type: ignore[assignment]
    dist_ = distributed or Distributed()
    out = Path(config.out_dir)
    training_device(config.train, dist_)  # reject what can be rejected before any write
    if not resume and dist_.main:
        claim_run_dir(out, overwrite)
    torch.manual_seed(config.train.seed)
    corpus = load_text_corpus(data.corpus, **data.options)
    if resume or not dist_.main:
        dist_.barrier()
        tokenizer = load_tokenizer(out / TOKENIZER_FILE)
    else:
        tokenizer = train_tokenizer(data, corpus.train)
    train_ids = torch.tensor(tokenizer.encode(corpus.train), dtype=torch.long)
    valid_ids = torch.tensor(tokenizer.encode(corpus.valid), dtype=torch.long)
    if data.valid_tokens is not None:
        valid_ids = valid_ids[: data.valid_tokens + 1]
    model_config = build_config(config.family, model_values(config.model, tokenizer.vocab_size))
    if data.block_size > model_config.max_len:
        raise ValueError(
            f"data.block_size={data.block_size} exceeds the model's max_len={model_config.max_len}"
        )
    model = build_model(config.family, model_config)
    saved = config.to_dict()
    saved["model"] = {"family": config.family, **config_to_dict(model_config)}
    if dist_.main:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / CONFIG_FILE, saved)
        tokenizer.save(out / TOKENIZER_FILE)
        if not resume:
            dist_.barrier()
    batch_size = max(1, config.train.batch_tokens // data.block_size)

    def evaluate() -> dict[str, float]:
        total, tokens = 0.0, 0
        for batch in lm_batches(
            valid_ids, block_size=data.block_size, batch_size=batch_size, shuffle=False
        ):
            loss, n = lm_loss(model, batch.to(_device_of(model)))
            total, tokens = total + float(loss), tokens + int(n)
        return {"valid_loss": total / max(tokens, 1)}

    result = train(
        model,
        loss_fn=lm_loss,
        batches=lambda epoch, start: lm_batches(
            train_ids,
            block_size=data.block_size,
            batch_size=batch_size,
            seed=config.train.seed,
            epoch=epoch,
            start=start,
        ),
        config=config.train,
        evaluate=evaluate,
        metric="valid_loss",
        higher_is_better=False,
        on_best=lambda _: save_weights(model, out / WEIGHTS_FILE),
        run_dir=out,
        resume=resume,
        handle_signals=handle_signals,
        progress=progress,
        count_tokens=lambda batch: batch.targets.numel(),
        distributed=dist_,
    )
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return TrainedLM(out, result, parameters)


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@dataclass(frozen=True)
class LMEvaluation:
    """Scores of a language model on one split.

    Attributes:
        loss: mean next-token cross-entropy in nats per token; perplexity: ``exp(loss)``.
        bits_per_char: total cross-entropy in bits over the characters of the scored text.
        tokens, chars: how much text was scored.
    """

    split: str
    loss: float
    perplexity: float
    bits_per_char: float
    tokens: int
    chars: int


class LanguageModel:
    """A trained language model with its tokenizer: generate text and score it.

    Lengths, in tokens: the model was trained on windows of ``data.block_size`` and reads at
    most ``max_len`` (its position table), so a prompt may have at most ``max_len - 1`` (room
    for one new token). A longer prompt is a ``ValueError`` naming both, raised before any
    generation (before tokenizing, when its characters or words already show it). Generation
    that reaches past ``block_size`` warns: positions past it were never trained, and past
    ``max_len`` the window slides, forgetting the start.
    """

    def __init__(self, model: TransformerLM, tokenizer: Tokenizer, config: RunConfig) -> None:
        self.model, self.tokenizer, self.config = model.eval(), tokenizer, config

    @classmethod
    def load(cls, model_dir: str | Path) -> LanguageModel:
        directory = Path(model_dir)
        if not (directory / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"no model directory at {directory} ({CONFIG_FILE} missing)")
        config = load_model_run_config(directory)
        if config.task != "language_model":
            raise ValueError(f"{directory} holds a {config.task} model, not a language model")
        tokenizer = load_tokenizer(directory / TOKENIZER_FILE)
        model_config = build_config(config.family, config.model)
        check_vocab_size(directory / TOKENIZER_FILE, tokenizer.vocab_size, model_config.vocab_size)
        model = build_model(config.family, model_config)
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model, tokenizer, config)

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.tokenizer)

    def _limits(self, room: int) -> LengthLimits:
        """Prompt lengths when ``room`` positions must stay free for new tokens."""
        trained = self.config.data.block_size  # type: ignore[union-attr]
        return LengthLimits(trained, self.model.config.max_len - room)

    def _encode(
        self, texts: list[str], *, room: int, consequence: str, item: str
    ) -> list[list[int]]:
        """The ids of each text after the length checks (``room``: positions kept free)."""
        limits = self._limits(room)
        limit = self.model.config.max_len
        room_note = " and keeps room for one new token" if room else ""
        advice = f"the model reads at most {limit} (max_len){room_note}; shorten it"
        single = len(texts) == 1
        refuse_absurd(
            texts,
            limits,
            chars_per_token=self._longest_token,
            advice=advice,
            single=single,
            item=item,
        )
        encoded = [self.encode_prompt(text) for text in texts]
        check_lengths(
            [len(ids) for ids in encoded],
            texts,
            limits,
            advice=advice,
            consequence=consequence,
            single=single,
            item=item,
            stacklevel=4,
        )
        return encoded

    def token_count(self, text: str) -> int:
        """The tokens of the prompt ``text`` (see :meth:`encode_prompt`)."""
        return len(self.encode_prompt(text))

    def encode_prompt(self, text: str) -> list[int]:
        """The ids of a prompt; an empty prompt starts from a newline. Characters a character
        model has never seen are an error naming them."""
        text = one_text(text, "the prompt")
        ids = self.tokenizer.encode(text or "\n")
        if UNK_ID in ids:
            unknown = sorted({c for c in text if self.tokenizer.encode(c) == [UNK_ID]})
            raise ValueError(
                f"the prompt has character(s) outside this model's vocabulary: {unknown!r}"
            )
        return ids

    def generate(
        self,
        prompts: Sequence[str],
        sampling: SamplingConfig | None = None,
        *,
        stop: Sequence[str] = (),
        on_text: Callable[[int, str], None] | None = None,
        weights_dtype: torch.dtype | None = None,
    ) -> list[str]:
        """Continue each prompt of ``prompts`` (a list of str: a bare str is a ``TypeError``,
        as it would be read as its characters); ``stop`` strings end a row (and are cut off);
        ``on_text(row, new_text)`` streams text as it is produced; ``weights_dtype``
        (``torch.bfloat16``) halves the memory each token reads. Lengths are checked as the
        class says."""
        prompts = text_list(prompts, "prompts")
        sampling = sampling or self.config.decode  # type: ignore[assignment]
        encoded = self._encode(
            prompts,
            room=1,
            consequence="continuing from positions it was never trained on, the model may go "
            "astray",
            item="prompt",
        )
        limit = self.model.config.max_len
        self._warn_reach(max((len(ids) for ids in encoded), default=0), sampling.max_new_tokens)
        shown = [""] * len(prompts)

        def cut_at_stop(text: str) -> str:
            for marker in stop:
                cut = text.find(marker)
                if cut >= 0:
                    text = text[:cut]
            return text

        def check(row: int, ids: list[int]) -> bool:
            text = self.tokenizer.decode(ids)
            visible = cut_at_stop(text)
            # Hold back an incomplete UTF-8 sequence (byte-level BPE) until it is whole.
            whole = not visible.endswith("\ufffd")
            if on_text is not None and whole and len(visible) > len(shown[row]):
                on_text(row, visible[len(shown[row]) :])
                shown[row] = visible
            return len(visible) < len(text)  # a stop string appeared

        watch = check if stop or on_text is not None else None
        out: Generation = generate(
            self.model,
            encoded,
            sampling,
            eos_id=EOS_ID,
            pad_id=PAD_ID,
            stop=watch,
            context=limit,
            weights_dtype=weights_dtype,
        )
        return [cut_at_stop(self.tokenizer.decode(ids)) for ids in out.tokens]

    def _warn_reach(self, prompt: int, new: int) -> None:
        """Warn when a prompt of ``prompt`` tokens plus ``new`` tokens outgrows the training
        windows (a prompt already longer than them has had its own warning)."""
        trained = self.config.data.block_size  # type: ignore[union-attr]
        limit = self.model.config.max_len
        if prompt > trained or prompt + new <= trained:
            return
        past = (
            f"past max_len={limit} the window slides and the text before it is forgotten"
            if prompt + new > limit
            else f"positions {trained}..{prompt + new - 1} were never trained"
        )
        warnings.warn(
            f"the longest prompt ({prompt:,} tokens) plus max_new_tokens={new:,} reaches "
            f"{prompt + new:,} tokens, more than the {trained:,} this model was trained on "
            f"(data.block_size): {past}",
            InputWarning,
            stacklevel=3,
        )

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """Each id as text (a byte-level piece may be part of a character: shown as U+FFFD)."""
        pieces = getattr(self.tokenizer, "pieces", None)
        if pieces is not None:
            return pieces(list(ids))
        return [self.tokenizer.decode([i]) for i in ids]

    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """The tokens of ``text`` and each layer's causal self-attention ``(H, T, T)`` over
        them (row ``t``: what position ``t`` attends to when it predicts token ``t + 1``).
        Lengths are checked as the class says (up to ``max_len`` tokens: nothing is
        generated)."""
        text = one_text(text, several="attention on each text")
        (ids,) = self._encode(
            [text],
            room=0,
            consequence="attention past them comes from positions it was never trained on",
            item="text",
        )
        device = _device_of(self.model)
        with torch.inference_mode():
            out = self.model(torch.tensor([ids], device=device), need_weights=True)
        layers = [w[0].float().cpu() for w in out.attentions.get("decoder", [])]
        return self.tokens(ids), layers

    def evaluate(self, split: str = "test", *, max_tokens: int | None = None) -> LMEvaluation:
        """Perplexity and bits per character on ``split`` of the model's corpus, in windows of
        the training ``block_size`` (``max_tokens``: score only the first that many)."""
        data: LMDataConfig = self.config.data  # type: ignore[assignment]
        corpus = load_text_corpus(data.corpus, **data.options)
        if split not in ("train", "valid", "test"):
            raise ValueError(f"split must be train, valid or test, got {split!r}")
        text = getattr(corpus, split)
        ids = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)
        if max_tokens is not None:
            ids = ids[: max_tokens + 1]
        total, tokens = 0.0, 0
        with torch.no_grad():
            for batch in lm_batches(ids, block_size=data.block_size, batch_size=16, shuffle=False):
                loss, n = lm_loss(self.model, batch)
                total, tokens = total + float(loss), tokens + int(n)
        scored = _chars_of(self.tokenizer, ids, tokens, data.block_size)
        return LMEvaluation(
            split,
            total / tokens,
            math.exp(total / tokens),
            total / math.log(2) / scored,
            tokens,
            scored,
        )


def _chars_of(tokenizer: Tokenizer, ids: Tensor, tokens: int, block_size: int) -> int:
    """Characters of the predicted targets: the tokens 1 .. of each scored window."""
    span = block_size + 1
    chars = 0
    for start in range(0, tokens // block_size * span, span):
        chars += len(tokenizer.decode(ids[start + 1 : start + span].tolist()))
    return chars

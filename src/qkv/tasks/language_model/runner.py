"""A trained language model as a runner: generate text, score it (perplexity, bits per
character), and show its causal self-attention over a prompt and its continuation."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path

import torch
from torch import Tensor, nn

from qkv.data.lm.corpora import load_text_corpus
from qkv.data.tokens.special import EOS_ID, PAD_ID, UNK_ID
from qkv.data.tokens.subword import check_vocab_size
from qkv.decoding.sampling import Generation, SamplingConfig, generate
from qkv.layers.packed_linear import Precision, check_precision
from qkv.models.language_model.model import TransformerLM
from qkv.models.registry import build_config, build_model
from qkv.tasks.input_checks import (
    InputWarning,
    LengthLimits,
    check_lengths,
    longest_token,
    one_text,
    refuse_absurd,
    text_list,
)
from qkv.tasks.language_model.config import LMDataConfig
from qkv.tasks.language_model.inputs import Tokenizer, lm_batches, lm_loss, load_tokenizer
from qkv.tasks.run_config import RunConfig
from qkv.tasks.run_dir import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    check_split,
    load_model_run_config,
)
from qkv.tasks.seen import Seen, TokenView
from qkv.tasks.spec import GIVEN, EvaluateOptions, Report, ViewOptions
from qkv.tasks.view_extras import checked_views, has_heads, with_vectors
from qkv.training.checkpoint import load_weights


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


def prompt_tokens(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids of one prompt; an empty prompt starts from a newline. Characters a character
    model has never seen are an error naming them."""
    ids = tokenizer.encode(text or "\n")
    if UNK_ID in ids:
        unknown = sorted({c for c in text if tokenizer.encode(c) == [UNK_ID]})
        raise ValueError(
            f"the prompt has character(s) outside this model's vocabulary: {unknown!r}"
        )
    return ids


def prompt_ids(
    texts: list[str],
    tokenizer: Tokenizer,
    limits: LengthLimits,
    *,
    max_len: int,
    room: int,
    longest: int,
    consequence: str,
    item: str,
    single: bool = False,
    stacklevel: int = 4,
) -> list[list[int]]:
    """The ids of each prompt after the checks every language-model runner makes: far too long
    is an error before tokenizing (``longest``: the most characters one token holds), over
    ``limits`` warns or is an error; ``room`` positions of ``max_len`` stay free for new
    tokens. ``stacklevel`` points the warnings at the caller's caller."""
    room_note = " and keeps room for one new token" if room else ""
    advice = f"the model reads at most {max_len} (max_len){room_note}; shorten it"
    refuse_absurd(texts, limits, chars_per_token=longest, advice=advice, single=single, item=item)
    encoded = [prompt_tokens(tokenizer, text) for text in texts]
    check_lengths(
        [len(ids) for ids in encoded],
        texts,
        limits,
        advice=advice,
        consequence=consequence,
        single=single,
        item=item,
        stacklevel=stacklevel,
    )
    return encoded


class LanguageModel:
    """A trained language model with its tokenizer: generate text and score it.

    Lengths, in tokens: the model was trained on windows of ``data.block_size`` and reads at
    most ``max_len`` (its position table), so a prompt may have at most ``max_len - 1`` (room
    for one new token). A longer prompt is a ``ValueError`` naming both, raised before any
    generation (before tokenizing, when its characters or words already show it). Generation
    that reaches past ``block_size`` warns: positions past it were never trained, and past
    ``max_len`` the window slides, forgetting the start.
    """

    takes_target = True  # views(prompt, ViewOptions(target=...)) reads a given continuation

    def __init__(
        self,
        model: TransformerLM,
        tokenizer: Tokenizer,
        config: RunConfig,
        *,
        precision: Precision = "float32",
    ) -> None:
        self.model, self.tokenizer, self.config = model.eval(), tokenizer, config
        self.precision = check_precision(precision)

    @classmethod
    def load(cls, model_dir: str | Path, *, precision: Precision = "float32") -> LanguageModel:
        """Load a directory written by a language-model run; ``precision``: the weights of the
        decode step (:mod:`qkv.layers.packed_linear`), unless a call asks for another."""
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
        assert isinstance(model, TransformerLM)  # the task's one family (checked in the config)
        load_weights(model, directory / WEIGHTS_FILE)
        return cls(model, tokenizer, config, precision=precision)

    @cached_property
    def _longest_token(self) -> int:
        return longest_token(self.tokenizer)

    def _limits(self, room: int) -> LengthLimits:
        """Prompt lengths when ``room`` positions must stay free for new tokens."""
        trained = self.config.section("data", LMDataConfig).block_size
        return LengthLimits(trained, self.model.config.max_len - room)

    def _encode(
        self, texts: list[str], *, room: int, consequence: str, item: str
    ) -> list[list[int]]:
        """The ids of each text after the length checks (``room``: positions kept free)."""
        return prompt_ids(
            texts, self.tokenizer, self._limits(room), max_len=self.model.config.max_len,
            room=room, longest=self._longest_token, consequence=consequence, item=item,
            single=len(texts) == 1, stacklevel=5,
        )  # fmt: skip

    def token_count(self, text: str) -> int:
        """The tokens of the prompt ``text`` (see :meth:`encode_prompt`)."""
        return len(self.encode_prompt(text))

    def encode_prompt(self, text: str) -> list[int]:
        """The ids of a prompt; an empty prompt starts from a newline. Characters a character
        model has never seen are an error naming them."""
        return prompt_tokens(self.tokenizer, one_text(text, "the prompt"))

    def generate(
        self,
        prompts: Sequence[str],
        sampling: SamplingConfig | None = None,
        *,
        stop: Sequence[str] = (),
        on_text: Callable[[int, str], None] | None = None,
        precision: Precision | None = None,
    ) -> list[str]:
        """Continue each prompt of ``prompts`` (a list of str: a bare str is a ``TypeError``,
        as it would be read as its characters); ``stop`` strings end a row (and are cut off);
        ``on_text(row, new_text)`` streams text as it is produced; ``precision``
        (``"bfloat16"``, ``"int8"``) halves or quarters the memory each token reads
        (:mod:`qkv.layers.packed_linear`; ``None``: the runner's own, float32 unless loaded
        with another). Lengths are checked as the class says."""
        prompts = text_list(prompts, "prompts")
        sampling = sampling or self.config.section("decode", SamplingConfig)
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
            precision=precision or self.precision,
        )
        return [cut_at_stop(self.tokenizer.decode(ids)) for ids in out.tokens]

    def _warn_reach(self, prompt: int, new: int) -> None:
        """Warn when a prompt of ``prompt`` tokens plus ``new`` tokens outgrows the training
        windows (a prompt already longer than them has had its own warning)."""
        trained = self.config.section("data", LMDataConfig).block_size
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
        data = self.config.section("data", LMDataConfig)
        corpus = load_text_corpus(data.corpus, **data.options)
        check_split(split)
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

    def report(
        self, split: str, *, limit: int | None = None, options: EvaluateOptions | None = None
    ) -> Report:
        """:meth:`evaluate` on the first ``limit`` tokens (all when None), as the CLI prints it
        and ``results.json`` records it."""
        result = self.evaluate(split, max_tokens=limit)
        lines = [
            f"{result.split}: {result.tokens:,} tokens ({result.chars:,} characters)",
            f"loss {result.loss:.4f} nats/token, perplexity {result.perplexity:.3f}",
            f"bits per character {result.bits_per_char:.4f}",
        ]
        record = {k: v for k, v in asdict(result).items() if k != "split"}
        return Report(split, lines, record, complete=limit is None)

    def new_tokens(
        self, prompt: int, *, shown: int, shows: str, requested: int | None, most: int
    ) -> int:
        """How many tokens to generate after a prompt of ``prompt`` tokens when at most
        ``shown`` tokens in all can be shown (``shows``: who shows them, for messages):
        ``requested`` (at most ``most``), or the model's ``decode.max_new_tokens`` cut to fit.

        Raises:
            ValueError: the prompt alone is too long, or ``requested`` is out of range or does
                not fit (the message says what to ask for instead).
        """
        limit = shown
        if self.model.config.max_len < limit:
            limit, shows = self.model.config.max_len, "this model reads"
        if prompt > limit:
            raise ValueError(
                f"the prompt has {prompt} tokens; {shows} at most {limit} (shorten it)"
            )
        if requested is None:
            default = min(self.config.section("decode", SamplingConfig).max_new_tokens, most)
            return min(default, limit - prompt)
        if not 0 <= requested <= most:
            raise ValueError(f"max_new_tokens must be between 0 and {most}, got {requested}")
        if prompt + requested > limit:
            raise ValueError(
                f"the prompt has {prompt} tokens and max_new_tokens is {requested}: "
                f"{prompt + requested} tokens, but {shows} at most {limit}; ask for at most "
                f"{limit - prompt} new tokens or shorten the prompt"
            )
        return requested

    def extras(self) -> frozenset[str]:
        """Which :data:`~qkv.tasks.view_extras.EXTRAS` :meth:`views` can add, from the model
        alone: ``neuron`` when it attends with qkv's multi-head attention."""
        return frozenset({"neuron"}) if has_heads(self.model) else frozenset()

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """Continue the prompt ``item`` greedily by ``options.new_tokens`` tokens (or take
        ``options.target`` as its continuation), then the causal self-attention over prompt and
        continuation."""
        options = options or ViewOptions()
        continuation = ""
        if options.target is not None:
            if options.new_tokens:
                raise ValueError(
                    "a target continuation is read, not generated: pass new_tokens or target, "
                    "not both"
                )
            continuation = options.target
        elif options.new_tokens:
            sampling = replace(SamplingConfig(), temperature=0.0, max_new_tokens=options.new_tokens)
            (continuation,) = self.generate([item], sampling)
        vectors = None
        if options.neuron:
            (tokens, layers), vectors = with_vectors(
                self.model, lambda: self.attention(item + continuation)
            )
        else:
            tokens, layers = self.attention(item + continuation)
        view = TokenView(
            "decoder", "causal self-attention (prompt and continuation)", tokens, tokens, layers,
            self_attention=True, vectors=vectors,
        )  # fmt: skip
        given = "" if options.target is None else GIVEN
        output = {"summary": item + continuation + given, "text": continuation, "prompt": item}
        return Seen(output, [view], subject="the prompt and its continuation")


def _chars_of(tokenizer: Tokenizer, ids: Tensor, tokens: int, block_size: int) -> int:
    """Characters of the predicted targets: the tokens 1 .. of each scored window."""
    span = block_size + 1
    chars = 0
    for start in range(0, tokens // block_size * span, span):
        chars += len(tokenizer.decode(ids[start + 1 : start + span].tolist()))
    return chars

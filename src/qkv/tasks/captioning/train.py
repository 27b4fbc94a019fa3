"""Image captioning end to end (Show, Attend and Tell, Xu et al. 2015): train a captioner on
strips of real images captioned with their class names (:mod:`qkv.data.images.strips`); the trained
model loads into a :class:`~qkv.tasks.captioning.runner.Captioner`, which captions new strips with
their
attention maps and scores them (exact match, BLEU, alignment accuracy).

A trained model directory holds ``config.json`` (``task: captioning``, the full model
configuration), ``vocab.json`` (the caption words), ``model.safetensors`` (the best weights by
validation exact match, the REINFORCE baseline included), ``metrics.csv`` and the checkpoints.

The objective (summed over a batch, divided by its target words by the training engine):

- soft attention: cross-entropy plus ``lambda sum_i (1 - sum_t alpha_ti)^2`` over the real
  regions of each strip, ``t`` over its target steps (the doubly stochastic penalty, eq. 14;
  less its constant part ``R - 2 T``, which has no gradient, so the logged loss stays readable);
- hard attention (eq. 12): the cross-entropy of the sampled path, the REINFORCE term and an
  entropy bonus ``lambda_e sum_t H[alpha_t]``. The REINFORCE term is
  ``-lambda_r sum_t (R_t - b L_t) log p(s_t | a)`` with ``R_t`` the log-likelihood of the target
  words from step ``t`` on (the reward of eq. 12 less the words before ``t``, which choice
  ``s_t`` cannot change: the gradient keeps its expectation and loses variance), ``L_t`` how
  many words that is and ``b`` a moving average of the log-likelihood per word (a buffer of the
  model). A share ``expected_fraction`` of the strips of each batch use the expected context
  instead of a sample (section 4.1) and get no REINFORCE term. Both extra terms enter as
  surrogates of value zero, so the logged training loss is the cross-entropy.

The weights ``lambda``, ``lambda_r`` and ``lambda_e`` are the ``train:`` section's
(:class:`CaptionTrainConfig`: ``doubly_stochastic``, ``reinforce_weight``, ``entropy_weight``);
a run saved when they were model keys loads with them moved there. How hard attention is trained
(``baseline_decay``, ``expected_fraction``) stays in the model configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkv.data.images.datasets import load_image_dataset
from qkv.data.images.strips import (
    CaptionVocab,
    StripBatch,
    check_strips_fit,
    held_out_strips,
    strip_batches,
    train_strips,
)
from qkv.data.tokens.special import PAD_ID
from qkv.models.presets import with_preset
from qkv.models.registry import build_config
from qkv.models.show_attend_tell.model import ShowAttendTell, ShowAttendTellConfig
from qkv.tasks.captioning.config import CaptionDataConfig, CaptionTrainConfig
from qkv.tasks.captioning.runner import score_strips
from qkv.tasks.run_dir import VOCAB_FILE
from qkv.tasks.run_skeleton import Trained, TrainingRun
from qkv.tasks.sections import PredictConfig
from qkv.training.checkpoint import CheckpointError

# ---------------------------------------------------------------------- the objective


def doubly_stochastic_penalty(weights: Tensor, region_keep: Tensor, step_keep: Tensor) -> Tensor:
    """``sum_i (1 - sum_t alpha_ti)^2`` per strip (eq. 14): ``weights (B, T, R)``, real regions
    ``region_keep (B, R)``, real target steps ``step_keep (B, T)`` -> ``(B,)``."""
    total = (weights * step_keep[..., None].to(weights.dtype)).sum(1)  # (B, R): sum_t alpha_ti
    return ((1 - total) ** 2 * region_keep.to(weights.dtype)).sum(-1)


def _unwrap(model: nn.Module) -> ShowAttendTell:
    """The captioner inside a DDP or ``torch.compile`` wrapper."""
    while not isinstance(model, ShowAttendTell):
        inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            raise TypeError(f"no ShowAttendTell inside a {type(model).__name__}")
        model = inner
    return model


def caption_loss(config: ShowAttendTellConfig, train: CaptionTrainConfig):
    """``(model, batch) -> (summed loss, target words)`` for the training engine (module doc):
    the weights and the label smoothing are ``train``'s."""

    def cross_entropy(logits: Tensor, target: Tensor) -> Tensor:  # logits (B, V, T)
        return F.cross_entropy(
            logits,
            target,
            ignore_index=PAD_ID,
            reduction="sum",
            label_smoothing=train.label_smoothing,
        )

    def loss_fn(model: nn.Module, batch: StripBatch) -> tuple[Tensor, Tensor]:
        target = batch.captions_out  # (B, T)
        steps = target != PAD_ID  # (B, T): the words and <eos>
        if config.attention == "soft":
            out = model(batch.images, batch.keep, batch.captions_in)
            loss = cross_entropy(out.logits.float().transpose(1, 2), target)
            if train.doubly_stochastic:
                keep = batch.keep.flatten(1)  # (B, R)
                penalty = doubly_stochastic_penalty(out.weights.float(), keep, steps)
                # Each alpha_t sums to one over the real regions, so eq. 14 is sum_i S_i^2 plus
                # the constant R - 2 T: dropped, so that the logged loss shows what can change.
                penalty = penalty - (keep.sum(1) - 2 * steps.sum(1))
                loss = loss + train.doubly_stochastic * penalty.sum()
            return loss, steps.sum()
        # Hard attention: these strips take the expected context instead of a sample (4.1).
        expected = torch.rand(target.size(0), device=target.device) < config.expected_fraction
        out = model(batch.images, batch.keep, batch.captions_in, expected=expected)
        logits = out.logits.float().transpose(1, 2)  # (B, V, T)
        loss = cross_entropy(logits, target)
        words = -F.cross_entropy(logits, target, ignore_index=PAD_ID, reduction="none")  # (B, T)
        words = words.detach()  # log p(y_t | ...), 0 at padding
        sampled = (~expected)[:, None] & steps  # (B, T)
        if torch.is_grad_enabled() and model.training:
            baseline = _unwrap(model).update_baseline(words[sampled])
        else:
            baseline = _unwrap(model).baseline
        to_go = words.flip(1).cumsum(1).flip(1)  # (B, T): log-likelihood of words t, t+1, ...
        left = steps.flip(1).cumsum(1).flip(1)  # (B, T): how many words that is
        advantage = (to_go - baseline * left) * sampled  # (B, T)
        # Surrogates whose value is zero and whose gradient is the REINFORCE estimate and the
        # entropy bonus's: the logged training loss stays the cross-entropy (and penalty).
        log_p = out.log_probs - out.log_probs.detach()
        entropy = (out.entropies - out.entropies.detach()) * steps
        loss = loss - train.reinforce_weight * (advantage * log_p).sum()
        return loss - train.entropy_weight * entropy.sum(), steps.sum()

    return loss_fn


# ---------------------------------------------------------------------- training


def model_values(model: dict[str, Any], vocab_size: int, image_shape: Sequence[int]) -> dict:
    """The model section with its ``preset`` expanded, the vocabulary size and the tile shape
    of the data set."""
    channels, height, width = image_shape
    return {
        **with_preset("show_attend_tell", model),
        "vocab_size": vocab_size,
        "image_channels": channels,
        "tile_height": height,
        "tile_width": width,
    }


def train_captioner(run: TrainingRun) -> Trained:
    """Train ``config``'s captioner; the best weights (by validation exact match) go to
    ``config.out_dir``."""
    config = run.config
    data = config.section("data", CaptionDataConfig)
    dataset = load_image_dataset(data.corpus, **data.options)
    for split in ("train", "valid", "test"):  # strips are drawn whole: refuse before any write
        count = getattr(data, f"{split}_strips")
        check_strips_fit(count, data.max_tiles, dataset.image_shape, split)
    # Every rank makes the words from the classes; a resumed run must find the same ones.
    vocab = CaptionVocab.from_classes(dataset.classes)
    if run.resume and CaptionVocab.load(run.out / VOCAB_FILE) != vocab:
        raise CheckpointError(
            f"{run.out / VOCAB_FILE} does not match the classes of data set {data.corpus!r}"
        )
    values = model_values(config.model, len(vocab), dataset.image_shape)
    model_config: ShowAttendTellConfig = build_config(config.family, values)
    model = ShowAttendTell(model_config)  # the one family of this task (TASK.families)
    run.save(model_config, write=lambda out: vocab.save(out / VOCAB_FILE))
    tiles = dict(min_tiles=data.min_tiles, max_tiles=data.max_tiles)
    valid = held_out_strips(dataset, "valid", data.valid_strips, **tiles)
    regions = model_config.regions_per_tile
    batch_size = config.section("decode", PredictConfig).batch_size

    def evaluate() -> dict[str, float]:
        total, words = 0.0, 0
        for batch in strip_batches(valid, batch_size, regions):
            batch = batch.to(next(model.parameters()).device)
            logits = model(batch.images, batch.keep, batch.captions_in).logits.float()
            total += float(
                F.cross_entropy(
                    logits.transpose(1, 2), batch.captions_out, ignore_index=PAD_ID, reduction="sum"
                )
            )
            words += int((batch.captions_out != PAD_ID).sum())
        scores = score_strips(model, vocab, valid, batch_size)
        return {
            "valid_loss": total / words,
            "valid_exact_match": scores.exact_match,
            "valid_bleu": scores.bleu,
            "valid_alignment_accuracy": scores.alignment_accuracy,
        }

    def batches(epoch: int, start: int):
        strips = train_strips(
            dataset,
            data.train_strips,
            **tiles,
            seed=config.train.seed,
            epoch=epoch,
            max_shift=data.max_shift,
        )
        return strip_batches(strips, data.batch_size, regions, start=start)

    return run.train(
        model,
        loss_fn=caption_loss(model_config, config.section("train", CaptionTrainConfig)),
        batches=batches,
        evaluate=evaluate,
        metric="valid_exact_match",
        higher_is_better=True,
        count_tokens=lambda batch: int((batch.captions_out != PAD_ID).sum()),
    )

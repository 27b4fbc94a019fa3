"""The optimiser every run uses: AdamW (Loshchilov & Hutter 2019) with weight decay on weight
matrices only, its learning rate scaled each step by the ``train.schedule`` multiplier
(:mod:`qkv.training.schedules`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from qkv.training.config import TrainConfig
from qkv.training.schedules import lr_multiplier


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only; none on biases, norms and embeddings."""
    embedding_params = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    decay, no_decay, seen = [], [], set()
    for param in model.parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if param.dim() >= 2 and id(param) not in embedding_params:
            decay.append(param)
        else:
            no_decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def optimiser_and_schedule(
    model: nn.Module, config: TrainConfig
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``model``'s parameters (tied ones once) and its learning-rate schedule."""
    optimiser = torch.optim.AdamW(
        parameter_groups(model, config.weight_decay), lr=config.lr, betas=config.adam_betas
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lr_multiplier(config.schedule, warmup=config.warmup_steps, total=config.max_steps),
    )
    return optimiser, schedule

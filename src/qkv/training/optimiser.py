"""The optimiser of a run: AdamW (Loshchilov & Hutter 2019; the default) or plain SGD
(``train.optimizer``), with weight decay on weight matrices only, its learning rate scaled each
step by the ``train.schedule`` multiplier (:mod:`qkv.training.schedules`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from qkv.training.config import TrainConfig
from qkv.training.schedules import lr_multiplier


def parameter_groups(
    model: nn.Module, weight_decay: float, head_lr: float | None = None
) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only; none on biases, norms and embeddings. With
    ``head_lr``, the parameters outside ``model.encoder`` form two more groups (decayed and
    not) at that learning rate.

    Raises:
        ValueError: ``head_lr`` for a model without an ``encoder`` submodule.
    """
    embedding_params = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    body: set[int] = set()
    if head_lr is not None:
        encoder = getattr(model, "encoder", None)
        if not isinstance(encoder, nn.Module):
            raise ValueError(
                f"train.head_lr needs a model with an encoder and a head; "
                f"{type(model).__name__} has no encoder: remove train.head_lr"
            )
        body = {id(p) for p in encoder.parameters()}
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {
        (h, d): [] for h in (False, True) for d in (True, False)
    }
    seen: set[int] = set()
    for param in model.parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        decayed = param.dim() >= 2 and id(param) not in embedding_params
        groups[(head_lr is not None and id(param) not in body, decayed)].append(param)
    out = [
        {"params": groups[(False, True)], "weight_decay": weight_decay},
        {"params": groups[(False, False)], "weight_decay": 0.0},
    ]
    if head_lr is not None:
        out += [
            {"params": groups[(True, True)], "weight_decay": weight_decay, "lr": head_lr},
            {"params": groups[(True, False)], "weight_decay": 0.0, "lr": head_lr},
        ]
    return out


def optimiser_and_schedule(
    model: nn.Module, config: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """``train.optimizer`` (AdamW or SGD without momentum) over ``model``'s parameters (tied
    ones once) and its learning-rate schedule."""
    groups = parameter_groups(model, config.weight_decay, config.head_lr)
    optimiser: torch.optim.Optimizer
    if config.optimizer == "sgd":
        optimiser = torch.optim.SGD(groups, lr=config.lr)
    else:
        optimiser = torch.optim.AdamW(groups, lr=config.lr, betas=config.adam_betas)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lr_multiplier(config.schedule, warmup=config.warmup_steps, total=config.max_steps),
    )
    return optimiser, schedule

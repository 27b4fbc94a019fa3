"""Where a run trains: the device ``train.device`` names, checked before anything is written,
and batches moved onto it."""

from __future__ import annotations

from typing import Any

import torch

from qkv.training.config import TrainConfig
from qkv.training.distributed import Distributed
from qkv.training.metrics_log import check_tensorboard


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when PyTorch sees a GPU, else the CPU; a CUDA device that is not there is
    an error naming what is."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ValueError(f"train.device={name!r}, but PyTorch sees {count} CUDA device(s)")
    return device


def training_device(config: TrainConfig, distributed: Distributed | None = None) -> torch.device:
    """The device ``config`` trains on, after the checks that need no model and no data (the
    device is there, fp16 runs on CUDA, TensorBoard is installed when asked for). A task calls
    it before it writes anything, so that a rejected setting leaves no files behind."""
    device = resolve_device(config.device)
    if config.precision == "fp16" and device.type != "cuda":
        raise ValueError("train.precision=fp16 needs a CUDA device; use bf16 on the CPU")
    check_tensorboard(config.tensorboard)
    return rank_device(device, config, distributed)


def rank_device(
    device: torch.device, config: TrainConfig, distributed: Distributed | None
) -> torch.device:
    """``device`` (resolved by :func:`training_device`) as this process uses it: under torchrun
    with ``train.device`` ``auto`` or ``cuda``, the GPU of the process's local rank."""
    dist_ = distributed or Distributed()
    if dist_.world > 1 and device.type == "cuda" and config.device in ("auto", "cuda"):
        return torch.device("cuda", dist_.local_rank)  # one GPU per process
    return device


def move_to(batch: Any, device: torch.device) -> Any:
    """A batch on ``device``: anything with ``.to(device)``, or a tuple/list of them."""
    if isinstance(batch, tuple | list):
        return type(batch)(move_to(b, device) for b in batch)
    return batch.to(device) if hasattr(batch, "to") else batch

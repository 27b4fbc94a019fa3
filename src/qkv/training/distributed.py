"""More than one process: ``torchrun`` sets the environment, qkv joins the process group.

``torchrun --nproc_per_node K -m qkv train CONFIG`` starts K copies of ``qkv train``; each reads
``RANK``, ``WORLD_SIZE`` and ``MASTER_ADDR``/``MASTER_PORT`` from the environment (torchrun's
contract), joins the group (gloo on CPU, NCCL on CUDA), trains its own shard of every global
batch under ``DistributedDataParallel``, and only rank 0 writes checkpoints, metrics and models.
Without those variables everything runs in one process and nothing here is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


@dataclass(frozen=True)
class Distributed:
    """This process's place in the group (``world == 1``: a single process)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0  # the rank on this machine (which GPU to use)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def shard(self, items: Iterable[T], start: int = 0) -> Iterator[T]:
        """This rank's items of an epoch: ``items[rank::world]`` after dropping the tail that
        would leave ranks with different counts, skipping the first ``start`` of them."""
        plan = list(items)
        usable = len(plan) - len(plan) % self.world
        yield from plan[self.rank : usable : self.world][start:]

    def sum(self, value: float) -> float:
        """The sum of ``value`` over every process."""
        if self.world == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(tensor)
        return float(tensor.item())

    def from_main(self, value: Any) -> Any:
        """Rank 0's ``value`` (any picklable object), on every rank: one decision for all."""
        if self.world == 1:
            return value
        holder = [value]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def from_environment(device: torch.device | None = None) -> Distributed:
    """Join the process group torchrun describes, or return the single-process ``Distributed``."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    rank = int(os.environ["RANK"])
    if not dist.is_initialized():
        cuda = device is not None and device.type == "cuda"
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    return Distributed(rank=rank, world=world, local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

"""Process-group helpers, so the training loop reads the same with one process or many under `torchrun`.

`torchrun` sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; without them we run as a single
process and every helper here is a no-op. CPU uses gloo, CUDA uses nccl (one GPU per local rank).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from bertforge.device import resolve_device


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the process group if launched by torchrun (or already joined); else a single-process DistInfo."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_available() and dist.is_initialized():
        world_size, rank = dist.get_world_size(), dist.get_rank()
    dev = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def cleanup(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def any_true(flag: bool, info: DistInfo) -> bool:
    """True on every rank if it is true on any: ranks must take the same branch (skip a step, stop)."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=_collective_device(info))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def all_sum(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sum over ranks of a few floats (metric counters)."""
    if not info.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_collective_device(info))
    dist.all_reduce(t)
    return t.tolist()


def gather_objects(obj: Any, info: DistInfo) -> list[Any] | None:
    """Every rank's `obj` on rank 0 (a list by rank), None elsewhere; [obj] without a process group."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world_size if info.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank (e.g. a decision to stop on a wall-clock budget)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _collective_device(info: DistInfo) -> torch.device:
    return info.device if dist.get_backend() == "nccl" else torch.device("cpu")


def is_main_process() -> bool:
    """Rank 0, or the only process (what prints a command's summary)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0

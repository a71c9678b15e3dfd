"""Process-group helpers for ``torchrun --nproc_per_node N -m elmo train`` (gloo on CPU, NCCL on GPU).

Without torchrun's environment variables everything degrades to a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str | None = None) -> tuple[DistInfo, torch.device]:
    """Join the process group when launched by torchrun; pick this process's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    info = DistInfo(int(os.environ.get("RANK", "0")), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", info.local_rank if info.enabled else (dev.index or 0))
        torch.cuda.set_device(dev)
    if info.enabled and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return info, dev


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def mean_across(info: DistInfo, values: torch.Tensor) -> torch.Tensor:
    """Average a small tensor over all processes (for logging)."""
    if not info.enabled:
        return values
    values = values.clone()
    dist.all_reduce(values)
    return values / info.world_size


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()

"""Process-group helpers for ``torchrun --nproc_per_node N -m elmo train|embed``.

Training joins with NCCL on GPUs and gloo on CPUs; embedding only meets at barriers, so it always uses gloo.
Without torchrun's environment variables everything degrades to a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """This process's place among the ranks torchrun started."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> DistInfo:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls()
        return cls(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def owns(self, chunk: int) -> bool:
        """Work item ``chunk`` belongs to rank ``chunk % world_size``."""
        return chunk % self.world_size == self.rank

    def default_device(self) -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank % torch.cuda.device_count())
        return torch.device("cpu")

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def init_distributed(device: str | None = None) -> tuple[DistInfo, torch.device]:
    """Join the process group when launched by torchrun; pick this process's device."""
    info = DistInfo.from_environment()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", info.local_rank if info.enabled else (dev.index or 0))
        torch.cuda.set_device(dev)
    if info.enabled and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return info, dev


def join_for_barriers() -> DistInfo:
    """Ranks that only meet at barriers (embedding): gloo even on GPUs, since it carries a few bytes, and a long
    timeout, since ranks meet only at the start and after all their work."""
    info = DistInfo.from_environment()
    if info.enabled and not dist.is_initialized():
        dist.init_process_group(backend="gloo", timeout=timedelta(hours=48))
    return info


def mean_across(info: DistInfo, values: torch.Tensor) -> torch.Tensor:
    """Average a small tensor over all processes (for logging)."""
    if not info.enabled:
        return values
    values = values.clone()
    dist.all_reduce(values)
    return values / info.world_size


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

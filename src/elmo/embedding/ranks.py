"""Splitting an embedding run over processes started by ``torchrun`` (one per GPU, or several CPU processes).

Chunk c of the input belongs to rank ``c % world_size``. Every rank reads the whole input (cheap next to the
model) so that all of them agree on the chunks and report the same bad line; they write their parts, meet at a
barrier, and rank 0 merges. Without ``torchrun`` (no ``WORLD_SIZE``) there is one rank and no process group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def owns(self, chunk: int) -> bool:
        return chunk % self.world_size == self.rank

    def default_device(self) -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank % torch.cuda.device_count())
        return torch.device("cpu")

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()


def ranks_from_environment() -> Ranks:
    """The ranks ``torchrun`` describes in its environment variables, joining its process group if needed."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Ranks()
    ranks = Ranks(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        # gloo for the barrier even on GPUs: it only ever carries a few bytes.
        # A long timeout: ranks meet only at the start and after all their chunks.
        dist.init_process_group(backend="gloo", timeout=timedelta(hours=48))
    return ranks


def leave_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

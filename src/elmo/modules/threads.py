"""CPU thread policy for inference: small ops on one thread, only big GEMMs on all threads.

Every multi-threaded torch op ends at a fork/join barrier. With small tensors the barrier costs more than the op,
and when other jobs share the cores it waits for a descheduled thread, which can cost more than the op itself many
times over. GEMMs with tens of millions of multiply-adds per thread are still worth sharing.

Inside :func:`small_ops_on_one_thread`, torch runs on one thread except within :func:`gemm_threads` blocks that
are big enough. Outside it (training, user code) both are no-ops. Not for concurrent use from several Python
threads: torch's thread count is process-wide.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

MIN_MACS_PER_THREAD = 32_000_000
"""A GEMM is shared only when each thread gets at least this many multiply-adds."""

_threads: int | None = None  # the caller's thread count while a one-thread block is active


@contextmanager
def small_ops_on_one_thread(device: torch.device | str) -> Iterator[None]:
    """Run the block on one CPU thread, except big GEMMs (see :func:`gemm_threads`). Nests; no-op off the CPU."""
    global _threads
    if torch.device(device).type != "cpu" or _threads is not None or torch.get_num_threads() == 1:
        yield
        return
    _threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(_threads)
        _threads = None


@contextmanager
def gemm_threads(macs: int) -> Iterator[None]:
    """Give a GEMM of ``macs`` multiply-adds all the caller's threads, if that is worth a barrier."""
    share = _threads is not None and macs >= MIN_MACS_PER_THREAD * _threads
    if share:
        torch.set_num_threads(_threads)
    try:
        yield
    finally:
        if share:
            torch.set_num_threads(1)

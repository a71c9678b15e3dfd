"""CPU thread policy for inference: small ops on one thread, only big GEMMs on all threads, and the biLM's two
directions side by side on two cores.

Every multi-threaded torch op ends at a fork/join barrier. With small tensors the barrier costs more than the op,
and when other jobs share the cores it waits for a descheduled thread, which can cost more than the op itself many
times over. GEMMs with tens of millions of multiply-adds per thread are still worth sharing.

Inside :func:`small_ops_on_one_thread`, torch runs on one thread except within :func:`gemm_threads` blocks that
are big enough. Outside it (training, user code) both are no-ops. Inside it, :func:`side_by_side` runs
independent work (the two directions) on Python threads of their own, one torch thread each: a recurrent step's
GEMM is too small to keep two cores busy, but two of them, one per core, do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import torch

MIN_MACS_PER_THREAD = 32_000_000
"""A GEMM is shared only when each thread gets at least this many multiply-adds."""

_threads: int | None = None  # the caller's thread count while a one-thread block is active
_local = threading.local()  # .beside: this Python thread runs beside others, one core each (no GEMM sharing)

T = TypeVar("T")


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
    share = _threads is not None and not getattr(_local, "beside", False) and macs >= MIN_MACS_PER_THREAD * _threads
    if share:
        torch.set_num_threads(_threads)
    try:
        yield
    finally:
        if share:
            torch.set_num_threads(1)


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """The calls' results, in order: run concurrently, one core each, inside :func:`small_ops_on_one_thread` when
    it holds exactly one thread per call; one after the other otherwise (outside it, or another thread count).

    Each call must only read shared tensors and write its own. Grad and inference mode are per Python thread in
    torch, so the caller's are carried into the others. The results equal the sequential ones up to GEMM summation
    order (MKL's differs between one and two threads: about 1e-7 relative).
    """
    if len(calls) < 2 or _threads != len(calls) or getattr(_local, "beside", False):
        return [call() for call in calls]
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        _local.beside = True
        torch.set_num_threads(1)  # a new thread starts from the process default, not the caller's one thread
        try:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                results[index] = calls[index]()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)
        finally:
            _local.beside = False

    others = [threading.Thread(target=run, args=(i,), name=f"elmo-side-{i}") for i in range(1, len(calls))]
    for thread in others:
        thread.start()
    run(0)
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]
    return results

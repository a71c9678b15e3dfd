"""CPU thread policy: the process's torch thread count, and the policy of inference: small ops on one thread, only
big matrix products on all threads, and the biLM's two directions side by side on two cores.

Both are set by entry points only: the thread count by ``elmo serve``'s workers, a Ray actor and a Spark task; the
policy by the embedder for one batch, the language model's evaluations (perplexity, substitutes), a task model's
predictions and AllenNLP's frozen ``ElmoBiLm``. The model code (``modules/``) neither enters nor asks for any of it.

Every multi-threaded torch op ends at a fork/join barrier. With small tensors the barrier costs more than the op,
and when other jobs share the cores it waits for a descheduled thread, which can cost more than the op itself many
times over. Matrix products with tens of millions of multiply-adds per thread are still worth sharing.

Inside :func:`small_ops_on_one_thread`, torch runs on one thread, and the policy watches the matrix products the
calling thread runs (a ``TorchFunctionMode``): those big enough (:data:`MIN_MACS_PER_THREAD`) get the caller's
threads for their own duration. Outside it (training, user code) torch runs as it was set. Inside it,
:func:`elmo.runtime.side_by_side.side_by_side` runs independent work (the two directions) on Python threads of their
own, one torch thread each and no sharing: a recurrent step's product is too small to keep two cores busy, but two
of them, one per core, do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

MIN_MACS_PER_THREAD = 32_000_000
"""A matrix product is shared only when each thread gets at least this many multiply-adds."""

_threads: int | None = None  # the caller's thread count while the policy holds
_local = threading.local()  # .beside: this Python thread runs beside others, one core each


def set_process_threads(n: int) -> None:
    """Give torch ``n`` CPU threads (at least one) from now on: the one place an entry point sets the count (a
    service's workers, a Ray actor or a Spark task sharing a machine's cores with others)."""
    torch.set_num_threads(max(1, int(n)))


def policy_threads() -> int | None:
    """The caller's thread count while :func:`small_ops_on_one_thread` holds; None outside it."""
    return _threads


def is_beside() -> bool:
    """Whether this Python thread runs beside others, one core each (:func:`beside_others`)."""
    return getattr(_local, "beside", False)


@contextmanager
def beside_others() -> Iterator[None]:
    """This Python thread runs beside others for the block, on one torch thread (and, without the policy's watch,
    shares no product); :func:`~elmo.runtime.side_by_side.side_by_side` inside it runs its calls in order."""
    _local.beside = True
    torch.set_num_threads(1)  # a new thread starts from the process default, not the caller's one thread
    try:
        yield
    finally:
        _local.beside = False


@contextmanager
def small_ops_on_one_thread(device: torch.device | str) -> Iterator[None]:
    """Run the block on one CPU thread, except the calling thread's big matrix products (:class:`_BigProducts`).
    Nests; no-op off the CPU and with one thread."""
    global _threads
    if torch.device(device).type != "cpu" or _threads is not None or torch.get_num_threads() == 1:
        yield
        return
    _threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _BigProducts(_threads):
            yield
    finally:
        torch.set_num_threads(_threads)
        _threads = None


def _width(out: torch.Tensor | None, columns: int) -> int:
    """The width of the matrix a product writes into: a block of columns of a wider row-major matrix (the LSTM's
    gate products, computed a block of columns at a time for the cache) counts the whole matrix, so the blocks of one
    product are shared or not together, as that product."""
    if out is None or out.dim() < 2 or out.stride(-1) != 1:
        return columns
    return max(columns, out.stride(-2))


def _linear_macs(args: tuple, kwargs: dict) -> int:
    return args[0].numel() * args[1].shape[0]  # x (..., K), weight (N, K): rows * K * N


def _matmul_macs(args: tuple, kwargs: dict) -> int:
    a, b = args[0], args[1]  # (..., M, K) x (K, N)
    return a.numel() * _width(kwargs.get("out"), b.shape[-1] if b.dim() > 1 else 1)


def _addmm_macs(args: tuple, kwargs: dict) -> int:
    mat1, mat2 = args[1], args[2]  # (M, K) x (K, N), added to args[0]
    return mat1.numel() * _width(kwargs.get("out"), mat2.shape[-1])


def _addmm_in_place_macs(args: tuple, kwargs: dict) -> int:
    return args[1].numel() * _width(args[0], args[2].shape[-1])  # into self, args[0]


_PRODUCTS: dict[Callable, Callable[[tuple, dict], int]] = {
    torch.nn.functional.linear: _linear_macs,
    torch.matmul: _matmul_macs,
    torch.Tensor.matmul: _matmul_macs,
    torch.Tensor.__matmul__: _matmul_macs,
    torch.mm: _matmul_macs,
    torch.Tensor.mm: _matmul_macs,
    torch.addmm: _addmm_macs,
    torch.Tensor.addmm: _addmm_macs,
    torch.Tensor.addmm_: _addmm_in_place_macs,
}
"""The matrix products the policy watches -> their multiply-adds from the call's arguments."""


class _BigProducts(TorchFunctionMode):
    """Gives a matrix product of the calling thread all of ``threads`` when each gets at least
    :data:`MIN_MACS_PER_THREAD` multiply-adds, and one thread back after it. A torch function mode holds for the
    Python thread that entered it only, so the threads :func:`~elmo.runtime.side_by_side.side_by_side` starts, one
    core each, share no product."""

    def __init__(self, threads: int) -> None:
        super().__init__()
        self.threshold = MIN_MACS_PER_THREAD * threads
        self.threads = threads

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self._big(func, args, kwargs):
            return func(*args, **kwargs)
        torch.set_num_threads(self.threads)
        try:
            return func(*args, **kwargs)
        finally:
            torch.set_num_threads(1)

    def _big(self, func: Callable, args: tuple, kwargs: dict) -> bool:
        macs = _PRODUCTS.get(func)
        if macs is None:
            return False
        try:
            return macs(args, kwargs) >= self.threshold
        except (AttributeError, IndexError, TypeError):  # not the tensors a product takes: torch itself says so
            return False

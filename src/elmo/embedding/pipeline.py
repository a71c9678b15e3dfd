"""Overlapping a batch's host work with the model's work: while the model runs batch k on the caller's thread, one
background thread prepares the batches after it and another copies the vectors of the batches before it out of the
host buffer they arrived in.

Why: on one H200 the biLM's own GPU work embedded about 550,000 tokens/s, the whole embedder 162,000
(docs/benchmarks/gpu.md, 2026-12-04). The rest was host work done in series with the GPU's: a pinned buffer
allocated per batch (0.92 of 1.95 s), the copy out of it into the arrays a user keeps (as much again), the batch's
words, character ids and index. Here the buffers are allocated once per size (:class:`HostBuffers`) and the host
work of other batches runs while the model runs (:class:`BatchPipeline`).

The stages are callables given by the caller (the embedder's ``prepare``, ``run`` and ``collect``), so the pipeline
knows no model and the model no thread: ``run`` stays on the caller's thread, inside whatever the caller set up
there (the CPU thread policy, the CUDA stream, the stop request of :func:`~elmo.runtime.interrupts.stop_on_signals`).
The two background threads do host work only: no torch thread count, no process-wide setting, no autograd mode.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from elmo.runtime.interrupts import stop_point

log = logging.getLogger(__name__)

Batch = TypeVar("Batch")
Prepared = TypeVar("Prepared")
Ran = TypeVar("Ran")
Result = TypeVar("Result")

THREAD_PREFIX = "elmo-pipeline"
"""The names of the pipeline's threads start with this (``elmo-pipeline-prepare``, ``elmo-pipeline-collect``)."""
_POLL_S = 0.05
"""How often a thread blocked on a full queue looks whether the pipeline is stopping."""


def pipelined(choice: str, device: torch.device | str) -> bool:
    """Whether ``EmbedOptions.pipeline`` (``auto``, ``on``, ``off``) runs the pipeline on ``device``. ``auto``: on
    with CUDA, where the host work would otherwise wait for the GPU and the GPU for it; off on the CPU, whose cores
    already run the model, and where the two copies through a buffer cost more than they hide
    (docs/embedding.md, ``--pipeline``)."""
    return choice == "on" or (choice == "auto" and torch.device(device).type == "cuda")


# ------------------------------------------------------------------ host buffers


def bucket_of(elements: int) -> int:
    """The buffer size that serves a request of ``elements``: the next power of two (at least 1)."""
    return 1 << max(0, math.ceil(math.log2(max(1, elements))))


class HostBuffers:
    """Float32 output buffers on the host, allocated once per size bucket and lent to one batch at a time.

    A request of n elements is served by a buffer of :func:`bucket_of` (n) elements: the next power of two. Why
    buckets: a batch's output, (B, L+1, T, 2P), differs with every batch's longest sentence, so buffers of the exact
    size would almost never be reused; why powers of two: a buffer wastes less than half its size, and a run meets
    few buckets (sorted token-budget batches mostly fill the budget, so most of them share the top one or two), so
    the buffers stay few: at most ``limit`` per bucket, and their memory below 4 x ``limit`` x the largest batch's
    output. On CUDA they are pinned (page-locked): the device copies into them at full speed and asynchronously;
    pinning costs about as much as the copy, which is why it is done once per buffer, not per batch.

    At most ``limit`` buffers are lent at once; :meth:`lend` blocks until one comes back (the collect thread gives
    them back as it copies the vectors out), so a pipeline's memory is bounded whatever the stages' speeds.
    ``allocations``, ``reuses`` and ``most_lent`` count what happened, for tests and the benchmark.
    """

    def __init__(self, device: torch.device | str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.pinned = torch.device(device).type == "cuda"
        self.limit = limit
        self.allocations = 0
        self.reuses = 0
        self.most_lent = 0
        self.allocated_bytes = 0
        self._free: dict[int, list[torch.Tensor]] = {}
        self._lent = 0
        self._changed = threading.Condition()

    @property
    def lent(self) -> int:
        """Buffers lent now."""
        return self._lent

    def lend(self, shape: tuple[int, ...]) -> LentBuffer:
        """A buffer of ``shape`` (a view of its bucket's buffer), once fewer than ``limit`` are lent."""
        bucket = bucket_of(math.prod(shape))
        with self._changed:
            self._changed.wait_for(lambda: self._lent < self.limit)
            self._lent += 1
            self.most_lent = max(self.most_lent, self._lent)
            free = self._free.get(bucket)
            buffer = free.pop() if free else None
            if buffer is None:
                self.allocations += 1
                self.allocated_bytes += bucket * 4
            else:
                self.reuses += 1
        if buffer is None:
            try:  # outside the lock: pinning a large buffer takes a while, and the collect thread gives back meanwhile
                with torch.inference_mode(False):  # a plain tensor, whatever mode the lender runs in
                    buffer = torch.empty(bucket, dtype=torch.float32, pin_memory=self.pinned)
            except BaseException:
                with self._changed:
                    self._lent -= 1
                    self.allocations -= 1
                    self.allocated_bytes -= bucket * 4
                    self._changed.notify()
                raise
        return LentBuffer(self, buffer, shape)

    def copy_in(self, tensor: torch.Tensor) -> LentBuffer:
        """``tensor`` (float32, any device) copied into a lent buffer: from a GPU without waiting (the copy is queued
        on the current stream, and an event recorded after it, which :meth:`LentBuffer.ready` waits for)."""
        lent = self.lend(tuple(tensor.shape))
        try:
            lent.tensor.copy_(tensor, non_blocking=True)
            if tensor.device.type == "cuda":
                lent.copied = torch.cuda.Event()
                lent.copied.record(torch.cuda.current_stream(tensor.device))
        except BaseException:
            lent.give_back()
            raise
        return lent

    def _take_back(self, buffer: torch.Tensor) -> None:
        with self._changed:
            self._free.setdefault(buffer.numel(), []).append(buffer)
            self._lent -= 1
            self._changed.notify()


class LentBuffer:
    """One lent buffer: ``tensor`` (the shape asked for) and the same memory as a NumPy array, given back once."""

    def __init__(self, owner: HostBuffers, buffer: torch.Tensor, shape: tuple[int, ...]) -> None:
        n = math.prod(shape)
        self.tensor = buffer[:n].view(shape)
        self.array = buffer.numpy()[:n].reshape(shape)
        self.copied: torch.cuda.Event | None = None
        self._owner: HostBuffers | None = owner
        self._buffer = buffer

    def ready(self) -> np.ndarray:
        """The array, once the copy into it has finished."""
        if self.copied is not None:
            self.copied.synchronize()
        return self.array

    def give_back(self) -> None:
        """Return the buffer to its owner (after the copy into it has finished); again: nothing."""
        if self._owner is None:
            return
        owner, self._owner = self._owner, None
        if self.copied is not None:
            self.copied.synchronize()  # the device may still be writing into it
        owner._take_back(self._buffer)


# ------------------------------------------------------------------ the pipeline


@dataclass
class PipelineStats:
    """Seconds each stage was busy and the wall time of the pipelines that added to it. The overlap,
    1 - wall / (sum of the stages' busy seconds), is 0 when the stages ran one after another and 2/3 when all three
    were busy all the time."""

    prepare_s: float = 0.0
    run_s: float = 0.0
    collect_s: float = 0.0
    wall_s: float = 0.0
    batches: int = 0

    @property
    def busy_s(self) -> float:
        return self.prepare_s + self.run_s + self.collect_s

    @property
    def overlap(self) -> float:
        return 1.0 - self.wall_s / self.busy_s if self.busy_s > 0 else 0.0

    def describe(self) -> str:
        return (f"overlap {self.overlap:.2f} (busy: prepare {self.prepare_s:.2f} s, run {self.run_s:.2f} s, collect "
                f"{self.collect_s:.2f} s; wall {self.wall_s:.2f} s, {self.batches} batches)")


class _Failure:
    """An exception raised on a pipeline thread, in the place of the item it was raised for."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class BatchPipeline(Generic[Batch, Prepared, Ran, Result]):
    """Three stages over an iterable of batches, overlapped; results in batch order.

    ``prepare(batch)`` runs on a background thread (which also iterates the batches), up to ``depth`` batches ahead
    of ``run``; ``run(prepared)`` on the caller's thread, one batch after another in order (so carried states and
    a cache the model mutates stay on one thread); ``collect(ran)`` on a second background thread, at most
    ``depth`` batches behind. ``release(ran)`` frees what a run batch holds (its buffer) when it will not be
    collected (the pipeline stops early); ``collect`` frees it itself, also when it raises.

    Stopping: an exception raised by any stage, or by the iteration of the batches, reaches the caller as itself,
    after the results of the batches before it; the consumer's stopping early (``close()`` of the generator, or
    leaving a ``for`` loop over it, by ``break`` or an exception) stops both threads; either way both threads are
    joined before the generator finishes. A stop request (:func:`~elmo.runtime.interrupts.stop_point`) is looked at
    before each run. ``stats`` (a :class:`PipelineStats`) adds up the stages' busy seconds and the wall time.
    """

    def __init__(
        self, prepare: Callable[[Batch], Prepared], run: Callable[[Prepared], Ran], collect: Callable[[Ran], Result],
        *, release: Callable[[Ran], Any] | None = None, depth: int = 2, stats: PipelineStats | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.prepare, self.run, self.collect, self.release = prepare, run, collect, release
        self.depth = depth
        self.stats = stats if stats is not None else PipelineStats()

    def __call__(self, batches: Iterable[Batch]) -> Generator[Result, None, None]:
        """The results of ``batches``, in order (a generator: nothing starts before the first ``next``)."""
        return self._results(batches)

    def _results(self, batches: Iterable[Batch]) -> Generator[Result, None, None]:
        stopping = threading.Event()
        prepared: queue.Queue = queue.Queue(maxsize=self.depth)
        to_collect: queue.Queue = queue.Queue(maxsize=self.depth)
        collected: queue.Queue = queue.Queue()  # at most depth + 1 waiting: the loop below takes one when more
        threads = [
            threading.Thread(target=self._prepare_all, args=(batches, prepared, stopping), daemon=True,
                             name=f"{THREAD_PREFIX}-prepare"),
            threading.Thread(target=self._collect_all, args=(to_collect, collected, stopping), daemon=True,
                             name=f"{THREAD_PREFIX}-collect"),
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        waiting = 0  # batches run whose results are not yet handed out
        error: BaseException | None = None  # raised once the results of the batches before it are out
        try:
            while (item := prepared.get()) is not _END:
                if isinstance(item, _Failure):
                    error = item.error
                    break
                stop_point()
                began = time.perf_counter()
                try:
                    ran = self.run(item)
                except Exception as e:  # noqa: BLE001 - raised below, after the batches before it
                    error = e
                    break
                self.stats.run_s += time.perf_counter() - began
                to_collect.put(ran)  # the collect thread always takes, so this waits at most for one collect
                waiting += 1
                while waiting:  # hand out what is done; wait for the oldest only when more than depth are waiting
                    try:
                        result = collected.get(block=waiting > self.depth)
                    except queue.Empty:
                        break
                    waiting -= 1
                    yield _unwrapped(result)
            while waiting:
                waiting -= 1
                yield _unwrapped(collected.get())
            if error is not None:
                raise error
        finally:
            stopping.set()
            to_collect.put(_END)  # after it the collect thread has released whatever it did not collect
            for thread in threads:
                thread.join()
            self.stats.wall_s += time.perf_counter() - start

    def _prepare_all(self, batches: Iterable[Batch], out: queue.Queue, stopping: threading.Event) -> None:
        try:
            for batch in batches:
                if stopping.is_set():
                    return
                began = time.perf_counter()
                item = self.prepare(batch)
                self.stats.prepare_s += time.perf_counter() - began
                if not _put(out, item, stopping):
                    return
            _put(out, _END, stopping)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, which raises it
            _put(out, _Failure(e), stopping)

    def _collect_all(self, inbox: queue.Queue, out: queue.Queue, stopping: threading.Event) -> None:
        """Takes every item until the end mark, so the caller's puts never wait for ever: after a failure or a stop
        it releases them instead of collecting them."""
        failed = False
        while (item := inbox.get()) is not _END:
            if failed or stopping.is_set():
                self._release(item)
                continue
            began = time.perf_counter()
            try:
                out.put(self.collect(item))
                self.stats.batches += 1
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, which raises it
                failed = True
                out.put(_Failure(e))
            self.stats.collect_s += time.perf_counter() - began

    def _release(self, item: Any) -> None:
        if self.release is None:
            return
        try:
            self.release(item)
        except Exception:  # the pipeline is stopping for another reason, which the caller gets
            log.exception("releasing a batch the pipeline did not collect failed")


def _put(out: queue.Queue, item: Any, stopping: threading.Event) -> bool:
    """Put ``item`` once there is room, unless the pipeline stops first (False)."""
    while not stopping.is_set():
        try:
            out.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _unwrapped(result: Any) -> Any:
    if isinstance(result, _Failure):
        raise result.error
    return result

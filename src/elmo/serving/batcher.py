"""Dynamic batching: requests that arrive close together are merged, sorted by length and run in token-budget
batches on one model thread, and each request gets exactly its own sentences back.

Why it pays: one sentence streams every recurrent weight matrix once per time step, whatever the batch size, so
32 sentences in one batch cost little more than one. Stateless embedding makes merging safe: a sentence's vectors
do not depend on the other sentences of its batch (``Embedder.embed_batch``).

The loop (one asyncio task): wait for a request; give others ``max_wait_ms`` from the first one's arrival to join
(or less, once a full batch waits); take what is queued, up to a few batches' worth (a *round*); cut it with
``batch_plan.token_budget_batches``; run the batches one after another on the single model thread, so the event
loop keeps answering health checks, metrics and new requests meanwhile. Requests that arrive while a round runs
wait for the next round. A request whose client went away is dropped: its sentences are skipped unless they
share a batch with live ones, and its results are discarded.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from elmo.embedding.batch_plan import token_budget_batches
from elmo.embedding.contract import SentenceEmbedder
from elmo.serving.metrics import Metrics
from elmo.serving.requests import EmbedRequest
from elmo.serving.serve_options import ServeOptions

WARM_UP = [["The", "service", "is", "warming", "up", "."]]

ROUND_BATCHES = 4
"""A round takes queued requests until it holds this many full batches' worth of tokens (at least one request):
the results a round holds before its requests are answered stay bounded, and later requests are not held back
behind one huge round."""


class QueueFull(Exception):
    """The queue holds ``max_queue`` requests: the caller answers 503 with ``Retry-After: retry_after``."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass(eq=False)
class Job:
    request: EmbedRequest
    future: asyncio.Future
    arrived: float
    results: list[np.ndarray | None]
    remaining: int = field(init=False)

    def __post_init__(self) -> None:
        self.remaining = sum(1 for s in self.request.sentences if s)


class DynamicBatcher:
    """Queues :class:`EmbedRequest` s and answers each with its (L + 1, n, 2P) float32 arrays, in request order."""

    def __init__(self, embedder: SentenceEmbedder, options: ServeOptions, metrics: Metrics) -> None:
        self.embedder = embedder
        self.options = options
        self.metrics = metrics
        self.ready = False
        self._queue: deque[Job] = deque()
        self._queued_sentences = 0
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="elmo-model")
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._sentences_per_s = 0.0  # a running estimate, for Retry-After
        self._empty = np.zeros((embedder.num_layers, 0, embedder.output_dim), dtype=np.float32)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Finish every queued request, then stop the model thread."""
        self._stopping = True
        self._arrived.set()
        if self._task is not None:
            await self._task
        self._executor.shutdown()

    def submit(self, request: EmbedRequest) -> asyncio.Future:
        """Queue ``request``; the future gets its arrays. Cancel the future to drop the request.

        Raises :class:`QueueFull` when ``max_queue`` requests are waiting.
        """
        if self._task is not None and self._task.done():
            self._task.result()  # the loop died: raise its error rather than queue forever
        future = asyncio.get_running_loop().create_future()
        job = Job(request, future, time.monotonic(), [None] * len(request.sentences))
        for k, sentence in enumerate(request.sentences):
            if not sentence:
                job.results[k] = self._empty  # an empty sentence needs no model run, as in elmo embed
        if job.remaining == 0:
            future.set_result(job.results)
            return future
        if len(self._queue) >= self.options.max_queue:
            raise QueueFull(self._retry_after())
        self._queue.append(job)
        self._queued_sentences += len(request.sentences)
        future.add_done_callback(lambda f: self._drop(job) if f.cancelled() else None)
        self._update_queue_gauges()
        self._arrived.set()
        return future

    def _drop(self, job: Job) -> None:
        """A request whose client went away leaves the queue at once (if it is still there)."""
        if job in self._queue:
            self._queue.remove(job)
            self._queued_sentences -= len(job.request.sentences)
            self.metrics.skipped_sentences += job.remaining
            self._update_queue_gauges()

    def _retry_after(self) -> int:
        """Seconds until the queue has likely drained (at least 1)."""
        if self._sentences_per_s <= 0:
            return 1
        return max(1, math.ceil(self._queued_sentences / self._sentences_per_s))

    def _update_queue_gauges(self) -> None:
        self.metrics.queue_requests = len(self._queue)
        self.metrics.queue_sentences = self._queued_sentences

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.embedder.embed_batch, WARM_UP)
        self.ready = True
        self.metrics.ready = 1
        while True:
            while not self._queue:
                if self._stopping:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            await self._gather()
            jobs = self._take()
            if jobs:
                await self._run_round(jobs)

    async def _gather(self) -> None:
        """Wait until ``max_wait_ms`` after the oldest queued request arrived, or until a full batch waits."""
        if self.options.separate_requests:
            return
        deadline = self._queue[0].arrived + self.options.max_wait_ms / 1000
        while not self._stopping and not self._full_batch_waits():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                return

    def _full_batch_waits(self) -> bool:
        sentences = [s for job in self._queue for s in job.request.sentences if s]
        if len(sentences) >= self.options.max_batch_sentences:
            return True
        return len(sentences) * (max(map(len, sentences), default=0) + 2) >= self.options.max_batch_tokens

    def _take(self) -> list[Job]:
        """The next round: queued requests in arrival order up to ``ROUND_BATCHES`` batches' worth of tokens (one
        request without merging), less those whose client went away."""
        jobs: list[Job] = []
        tokens, budget = 0, ROUND_BATCHES * self.options.max_batch_tokens
        while self._queue and not (self.options.separate_requests and jobs) and tokens < budget:
            job = self._queue.popleft()
            self._queued_sentences -= len(job.request.sentences)
            if job.future.done():  # cancelled: the client disconnected while it waited
                self.metrics.skipped_sentences += job.remaining
                continue
            jobs.append(job)
            tokens += job.request.tokens
        self._update_queue_gauges()
        return jobs

    async def _run_round(self, jobs: list[Job]) -> None:
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        self.metrics.round_requests.observe(len(jobs))
        for job in jobs:
            self.metrics.queue_wait.observe(start - job.arrived)
        items = [(job, k) for job in jobs for k in range(len(job.request.sentences))]
        lengths = [len(job.request.sentences[k]) for job, k in items]
        done_sentences = 0
        for batch in token_budget_batches(lengths, self.options.max_batch_tokens, self.options.max_batch_sentences):
            live = [i for i in batch if not items[i][0].future.done()]
            self.metrics.skipped_sentences += len(batch) - len(live)
            if not live:
                continue
            sentences = [items[i][0].request.sentences[items[i][1]] for i in live]
            batch_start = time.monotonic()
            try:
                layers = await loop.run_in_executor(self._executor, self.embedder.embed_batch, sentences)
            except Exception as e:  # noqa: BLE001 - the requests in this batch fail; the service goes on
                for i in live:
                    if not items[i][0].future.done():
                        items[i][0].future.set_exception(e)
                continue
            self.metrics.batch_seconds.observe(time.monotonic() - batch_start)
            self._count_batch(sentences)
            done_sentences += len(sentences)
            for i, array in zip(live, layers):
                job, k = items[i]
                job.results[k] = array
                job.remaining -= 1
                if job.remaining == 0 and not job.future.done():
                    job.future.set_result(job.results)
        elapsed = time.monotonic() - start
        if done_sentences and elapsed > 0:
            rate = done_sentences / elapsed
            self._sentences_per_s = rate if self._sentences_per_s == 0 else 0.8 * self._sentences_per_s + 0.2 * rate

    def _count_batch(self, sentences: list[list[str]]) -> None:
        m = self.metrics
        m.batches += 1
        m.sentences += len(sentences)
        m.tokens += sum(map(len, sentences))
        m.batch_sentences.observe(len(sentences))
        m.batch_tokens.observe(len(sentences) * (max(map(len, sentences)) + 2))

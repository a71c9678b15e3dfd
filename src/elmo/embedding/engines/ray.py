"""``elmo embed --engine ray``: the file job's chunks on a pool of Ray actors (docs/scale-out.md).

The driver (the ``elmo embed`` process) reads the input, cuts it into chunks and keeps the output's manifest, as it
does with ``--engine local``; each actor loads the model once and, for every chunk it is given, embeds it and writes
its file of the output itself (:func:`~elmo.embedding.chunks.embed_chunk` through the output's
:class:`~elmo.embedding.chunks.ChunkWriter`, the local engine's code), so
vectors never travel back through the driver and a worker's memory is one batch or one row group, whatever the input
size. On a cluster the output directory must be on storage every node mounts.

Sizing, so that nothing can wait forever: the pool is the only thing that holds CPUs (the driver reads the input
itself, with no Ray task), each actor gets an equal whole share of the cluster's CPUs (torch takes as many threads),
and ``--workers`` more than the CPUs (GPUs with ``--device cuda``) is one error line before any model loads. One
chunk is in flight per actor; the next goes to whichever actor finishes first.

Failures: a worker that dies (killed, out of memory) is restarted and its chunk redone by Ray (``MAX_RETRIES``); a
chunk whose worker died mid-write leaves only a temp file, which the finished output drops. A killed driver leaves the
manifest of the chunks finished so far: ``--resume`` does the rest, on either engine. A Ray instance the driver
started ends with it (Ray ties the processes it starts to the driver's life); actors on a cluster it joined are
killed when the run ends, however it ends.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.embedding.chunks import Chunk, ChunkWriter, Receipt, embed_chunk
from elmo.embedding.contract import DescribedModel, Progress
from elmo.embedding.embed_options import EmbedOptions, EngineOptions
from elmo.embedding.selection import VectorSelection
from elmo.errors import ConfigError, ElmoError
from elmo.formats.model_ref import ModelRef
from elmo.runtime.extras import loopback_only, ray_errors_to, require, threads_from_ray_allotment

log = logging.getLogger(__name__)

WHAT = "elmo embed --engine ray"
MAX_RETRIES = 3
"""Restarts of a dead worker, and retries of the chunk it held, before the run stops (``--resume`` continues it)."""
START_TIMEOUT_S = 600.0
"""How long the workers may take to be placed and load their model before the run stops with an error."""


@dataclass(frozen=True)
class WorkerModel:
    """What each worker loads: the model (a :class:`~elmo.formats.model_ref.ModelRef`, resolved on the worker's
    node: a published model is downloaded into that node's cache), how it runs, and the ``--align`` matrix (an
    absolute path)."""

    options: EmbedOptions
    model: ModelRef
    device: str | None = None
    align: str | None = None

    def check(self) -> None:
        """In the driver, before Ray starts: a file that is not there is the line ``elmo embed`` gives."""
        if self.align is not None and not Path(self.align).is_file():
            raise ElmoError(f"{self.align}: no such file")

    def load(self) -> Any:
        return self.model.load()


class ChunkWorker:
    """A Ray actor: one model, loaded once; embeds chunks into their files."""

    def __init__(self, spec: WorkerModel) -> None:
        from elmo.embedding.embedder import Embedder
        from elmo.formats.alignment import read_alignment

        threads_from_ray_allotment(require("ray", "ray", WHAT))
        self.failed: ElmoError | None = None
        try:
            bilm = spec.load()
            alignment = read_alignment(spec.align, bilm.output_dim) if spec.align else None
            self.embedder = Embedder(bilm, spec.options, device=spec.device, alignment=alignment,
                                     model_name=spec.model.label)
        except ElmoError as e:  # raised by describe(): a task's error reaches the driver whole, an actor's does not
            self.failed = e

    def describe(self) -> dict[str, Any]:
        """Its model (what the driver's manifest records and checks: as the local embedder would give it), and the
        worker's process id, node and peak resident memory."""
        if self.failed is not None:
            raise self.failed
        return {"model": DescribedModel.of(self.embedder), "pid": os.getpid(), "node": socket.gethostname(),
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10}  # Linux: KiB

    def embed(self, selection: VectorSelection, writer: ChunkWriter, chunk: Chunk) -> Receipt:
        directory = writer.directory
        if not directory.is_dir():
            raise ElmoError(f"{directory}: not found on Ray node {socket.gethostname()}: on a cluster the output must "
                            "be on storage every node mounts, under the same path")
        return embed_chunk(self.embedder, selection, writer, chunk)


class RayEngine:
    """The actor pool of one run, used as ``with RayEngine(spec, options) as engine``: the file job's
    :class:`~elmo.embedding.chunks.ChunkEngine` while the block runs."""

    def __init__(self, spec: WorkerModel, options: EngineOptions) -> None:
        if spec.options.stateful:
            raise ConfigError("--initial-state carry carries state through the whole file in order; --engine ray "
                              "embeds chunks side by side: use --initial-state zero or warm")
        spec.check()
        self.spec = spec
        self.options = options
        self.ray: Any = None
        self.actors: list[Any] = []
        self._model: DescribedModel | None = None
        self._stack = ExitStack()

    # -- the pool's life ------------------------------------------------------------------------------------------
    def __enter__(self) -> RayEngine:
        ray = self.ray = require("ray", "ray", WHAT)
        with ExitStack() as stack:
            stack.enter_context(ray_session(ray, self.options.address))
            stack.callback(self._kill_actors)  # before the session ends (last in, first out)
            self._start_actors(ray)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _kill_actors(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # already gone with its cluster
                pass
        self.actors = []

    def _start_actors(self, ray: Any) -> None:
        gpu = (self.spec.device or "").startswith("cuda")
        resources = ray.cluster_resources()
        cpus, gpus = int(resources.get("CPU", 0)), int(resources.get("GPU", 0))
        have, kind = (gpus, "GPUs") if gpu else (cpus, "CPUs")
        workers = self.options.workers or have
        if workers < 1 or workers > have:
            raise ConfigError(f"--workers {workers}: the Ray cluster has {have} {kind}, and each worker needs one of "
                              f"its own; lower --workers{'' if have else ' (or give the cluster ' + kind + ')'}")
        share = max(1, cpus // workers)
        remote = ray.remote(num_cpus=share, num_gpus=1 if gpu else 0, max_restarts=MAX_RETRIES,
                            max_task_retries=MAX_RETRIES)(ChunkWorker)
        log.info("starting %d Ray workers (%d CPU%s%s each) of %s", workers, share, "s" if share > 1 else "",
                 " and 1 GPU" if gpu else "", self.spec.model.label)
        self.actors = [remote.remote(self.spec) for _ in range(workers)]
        pending = {actor.describe.remote(): actor for actor in self.actors}
        ready, waiting = ray.wait(list(pending), num_returns=len(pending), timeout=START_TIMEOUT_S)
        if waiting:
            raise ElmoError(f"{len(waiting)} of {workers} Ray workers were not placed and ready within "
                            f"{START_TIMEOUT_S:.0f} s (`ray status` shows what the cluster has free); lower --workers")
        described = [self._get(ref, "starting a worker") for ref in ready]
        self._model = described[0]["model"]
        log.info("Ray workers ready on %s", ", ".join(sorted({d["node"] for d in described})))

    def describe_workers(self) -> list[dict[str, Any]]:
        """Each worker's :meth:`ChunkWorker.describe`, now: its process id and node, its peak resident memory."""
        return [self._get(actor.describe.remote(), "asking a worker") for actor in self.actors]

    # -- ChunkEngine -------------------------------------------------------------------------------------------------
    @property
    def model(self) -> DescribedModel:
        """The workers' model, as the first one described it when the pool started."""
        if self._model is None:
            raise ElmoError("the Ray workers are not started: use the engine as `with RayEngine(...) as engine`")
        return self._model

    def run(self, selection: VectorSelection, writer: ChunkWriter, chunks: Iterable[Chunk],
            progress: Progress | None = None) -> Iterator[tuple[Chunk, Receipt]]:
        """Each chunk to the next free worker; yields them as they finish."""
        ray = self.ray
        writer = writer.absolute()  # a worker's working directory is not the driver's
        idle = list(self.actors)
        running: dict[Any, tuple[Chunk, Any]] = {}  # task -> its chunk and actor

        def finished() -> Iterator[tuple[Chunk, Receipt]]:
            while True:
                done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
                if done:
                    break
                if progress is not None:
                    progress(0, 0)  # a stop request (SIGINT/SIGTERM) ends the run here, between checks
            chunk, actor = running.pop(done[0])
            receipt = self._get(done[0], f"embedding chunk {chunk.index} (lines {chunk.lines[0]}-{chunk.lines[-1]})")
            idle.append(actor)
            if progress is not None:
                progress(len(chunk.sentences), sum(len(s) for s in chunk.sentences))
            yield chunk, receipt

        try:
            for chunk in chunks:
                while not idle:
                    yield from finished()
                actor = idle.pop()
                running[actor.embed.remote(selection, writer, chunk)] = (chunk, actor)
            while running:
                yield from finished()
        except BaseException:  # a bad input line, a stop request: no worker may rename a shard after this
            self._stop_workers(list(running))
            raise

    def _stop_workers(self, running: list[Any]) -> None:
        self._kill_actors()
        self.ray.wait(running, num_returns=len(running), timeout=30.0)  # each ends as its worker is gone

    def _get(self, ref: Any, doing: str) -> Any:
        """``ray.get``, with a worker's own error as its one line and a dead worker said plainly."""
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, ElmoError):
                raise cause from None
            raise ElmoError(f"a Ray worker failed {doing}: {type(cause or e).__name__}: {cause or e}") from None
        except ray.exceptions.RayActorError as e:
            raise ElmoError(f"a Ray worker died {doing}, {MAX_RETRIES} restarts used up ({str(e).splitlines()[0]}); "
                            "the finished chunks are kept: rerun with --resume") from None


@contextmanager
def ray_session(ray: Any, address: str | None) -> Iterator[None]:
    """Join the cluster at ``address``, or start a Ray instance on this machine for the run (loopback only: Ray
    binds the machine's routable address by default, open to its network); the instance ends with the run."""
    if address is not None:
        _check_reachable(ray, address)
    if ray.is_initialized():  # a Python caller's own session: use it as it is
        yield
        return
    with ExitStack() as session:
        session.enter_context(ray_errors_to(log))
        _start_ray(ray, address)
        session.callback(ray.shutdown)
        yield


def _start_ray(ray: Any, address: str | None) -> None:
    if address is None:
        with loopback_only(ray):
            ray.init(num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False, log_to_driver=False,
                     logging_level="error")
    else:
        try:
            ray.init(address=address, log_to_driver=False, logging_level="error")
        except ConnectionError as e:
            raise ElmoError(f"--address {address}: no Ray cluster found ({str(e).splitlines()[0]}); start one with "
                            "`ray start --head`, or drop --address to run one on this machine for this run") from None


def _check_reachable(ray: Any, address: str) -> None:
    """A HOST:PORT that answers nothing is one line at once, not Ray's minute of retries."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address}: expected auto or HOST:PORT (the head node's GCS address, "
                          "as `ray start --head` prints it)")
    try:
        socket.create_connection((host, int(port)), timeout=5.0).close()
    except OSError as e:
        raise ElmoError(f"--address {address}: cannot reach a Ray cluster there ({e.strerror or e}); check the "
                        "address `ray start --head` printed, or drop --address to run one on this machine") from None

"""Running the service: one process (the app over a model already loaded), or ``workers`` processes that share
one listening socket, each loading its own model and running its own batcher (uvicorn's process supervisor).

The listening sockets are bound first (:func:`bind_listeners`), before the model loads, so that a host that does not
resolve or is not this machine's, or a port in use, is one line at once instead of uvicorn's log after a long load;
uvicorn then serves on those sockets.

SIGTERM or SIGINT: uvicorn stops accepting connections, lets every open request finish (the batcher keeps
running until the last queued request is answered), then stops the batcher; :func:`run_service` returns the signals,
and ``elmo serve`` exits 0 after SIGTERM (a service's normal stop) and 130 after SIGINT (an interrupted command).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from elmo.embedding.embedder import Embedder
from elmo.errors import ElmoError
from elmo.formats.model_ref import ModelRef
from elmo.runtime.extras import require
from elmo.runtime.threads import set_process_threads
from elmo.serving.serve_options import ServeOptions

log = logging.getLogger("elmo")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

WORKER_SPEC = "ELMO_SERVE_WORKER_SPEC"
"""The environment variable through which worker processes receive what to load and how to serve."""


@dataclass(frozen=True)
class ModelSpec:
    """What each worker loads (the model, any spelling, as a :class:`~elmo.formats.model_ref.ModelRef`) and on
    which device; it travels to the worker processes as JSON."""

    model: ModelRef
    device: str | None = None

    @property
    def name(self) -> str:
        """What clients see: the published or shipped name, or the last part of the path (not the server's
        directories)."""
        return self.model.label

    def load(self):
        return self.model.load()

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, given: dict) -> ModelSpec:
        return cls(ModelRef(**given["model"]), given["device"])


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """The sockets the service will listen on, bound (not yet listening: a client is refused until the model is
    loaded and uvicorn serves), one per address ``host`` resolves to, as asyncio's own ``create_server`` binds them;
    with port 0, the first address only (one free port). A host that does not resolve or is not this machine's, a
    port in use or one this user may not bind: :class:`~elmo.errors.ElmoError`, one line."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ElmoError(f"cannot listen on {where}: the host does not resolve ({_reason(e)})") from None
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in list(dict.fromkeys(addresses))[: 1 if port == 0 else None]:
            listener = socket.socket(family, kind, proto)
            bound.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restart at once after a stop
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # IPv4 gets its own socket
            listener.bind(address)
            listener.set_inheritable(True)  # the worker processes serve on it
    except OSError as e:
        for listener in bound:
            listener.close()
        problem = {errno.EADDRINUSE: "the port is in use (another process listens there): choose another --port",
                   errno.EADDRNOTAVAIL: f"{host} is not an address of this machine ({_reason(e)})",
                   errno.EACCES: f"{_reason(e)}: ports below 1024 need privileges; choose another --port"}
        raise ElmoError(f"cannot listen on {where}: {problem.get(e.errno, _reason(e))}") from None
    return bound


def _reason(error: OSError | UnicodeError) -> str:
    text = getattr(error, "strerror", None) or str(error)
    return text[0].lower() + text[1:] if text else type(error).__name__


def run_service(spec: ModelSpec, options: ServeOptions, api_key: str | None, listeners: list[socket.socket],
                bilm=None) -> list[int]:
    """Serve on ``listeners`` (:func:`bind_listeners`) until SIGTERM/SIGINT; returns the stop signals that came (a
    second Ctrl-C stops at once). ``bilm``: the model already loaded from ``spec`` (one process only)."""
    uvicorn = require("uvicorn", "serve", "elmo serve")
    from uvicorn.supervisors import Multiprocess

    common = dict(access_log=options.access_log, timeout_graceful_shutdown=None,
                  log_level="info" if log.getEffectiveLevel() <= logging.INFO else "warning")
    host, port = listeners[0].getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    received: list[int] = []
    if options.workers == 1:
        from elmo.serving.app import create_app

        embedder = Embedder(bilm if bilm is not None else spec.load(), options.embed_options(), device=spec.device,
                            model_name=spec.name)
        server = uvicorn.Server(uvicorn.Config(create_app(embedder, options, spec.name, api_key), **common))
        log.info("listening on %s", url)
        # uvicorn re-raises the signals it stopped on once it has shut down, into the handlers it found: these
        with _remembering_stop_signals(received):
            server.run(sockets=listeners)
        return received
    os.environ[WORKER_SPEC] = json.dumps({"spec": spec.to_json(), "options": asdict(options) | {
                                              "precision": options.precision.value}, "api_key": api_key})
    log.info("listening on %s; starting %d worker processes, each loading %s", url, options.workers, spec.name)
    # a worker answers the supervisor's health checks once torch is imported (seconds on a loaded machine)
    config = uvicorn.Config("elmo.serving.service:worker_app", factory=True, workers=options.workers,
                            timeout_worker_healthcheck=120, **common)
    supervisor = Multiprocess(config, sockets=listeners)  # handles SIGINT/SIGTERM: SIGTERM to every worker
    with _remembering_stop_signals(received, chain=True):
        supervisor.run()
    return received


@contextmanager
def _remembering_stop_signals(received: list[int], chain: bool = False) -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM are appended to ``received``; ``chain``: then passed on to the handler
    installed before (uvicorn's supervisor), else nothing more happens (uvicorn's server installs its own handlers
    over these while it serves and calls these once it has stopped)."""
    previous = {}
    for number in STOP_SIGNALS:
        handler = signal.getsignal(number)

        def remember(signum, frame, handler=handler):
            received.append(signum)
            if chain and callable(handler):
                handler(signum, frame)

        previous[number] = signal.signal(number, remember)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def worker_app():
    """In a worker process: the app over this process's own model (uvicorn calls this factory)."""
    from elmo.serving.app import create_app

    # Ctrl-C reaches the whole process group: the supervisor turns it into SIGTERM for each worker, which drains;
    # a worker that also stopped on the SIGINT itself would re-raise it afterwards (uvicorn) as a KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    given = json.loads(os.environ[WORKER_SPEC])
    options = ServeOptions(**given["options"])
    set_process_threads((os.cpu_count() or 1) // options.workers)  # the workers share the cores
    spec = ModelSpec.from_json(given["spec"])
    embedder = Embedder(spec.load(), options.embed_options(), device=spec.device, model_name=spec.name)
    return create_app(embedder, options, spec.name, given["api_key"])

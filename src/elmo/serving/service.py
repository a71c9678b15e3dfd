"""Running the service: one process (the app over a model already loaded), or ``workers`` processes that share
one listening socket, each loading its own model and running its own batcher (uvicorn's process supervisor).

SIGTERM or SIGINT: uvicorn stops accepting connections, lets every open request finish (the batcher keeps
running until the last queued request is answered), then stops the batcher; ``elmo serve`` exits 0 on SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from dataclasses import asdict, dataclass

import torch

from elmo.embedding.embedder import Embedder
from elmo.runtime.extras import require
from elmo.serving.serve_options import ServeOptions

log = logging.getLogger("elmo")

WORKER_SPEC = "ELMO_SERVE_WORKER_SPEC"
"""The environment variable through which worker processes receive what to load and how to serve."""


@dataclass(frozen=True)
class ModelSpec:
    """What each worker loads: a model directory, or an options file + weight file (for ``load_bilm``)."""

    name: str
    model_dir: str | None = None
    options_file: str | None = None
    weight_file: str | None = None
    device: str | None = None

    def load(self):
        from elmo.formats.model_files import load_bilm

        if self.model_dir is not None:
            return load_bilm(self.model_dir)
        return load_bilm(options_file=self.options_file, weight_file=self.weight_file)


def run_service(spec: ModelSpec, options: ServeOptions, api_key: str | None, bilm=None) -> None:
    """Serve until SIGTERM/SIGINT. ``bilm``: the model already loaded from ``spec`` (one process only)."""
    uvicorn = require("uvicorn", "serve", "elmo serve")

    common = dict(host=options.host, port=options.port, access_log=options.access_log, timeout_graceful_shutdown=None,
                  log_level="info" if log.getEffectiveLevel() <= logging.INFO else "warning")
    # uvicorn re-raises the signal it stopped on once it has shut down; a no-op handler makes that a clean exit
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    if options.workers == 1:
        from elmo.serving.app import create_app

        embedder = Embedder(bilm if bilm is not None else spec.load(), options.embed_options(), device=spec.device,
                            model_name=spec.name)
        uvicorn.run(create_app(embedder, options, spec.name, api_key), **common)
        return
    os.environ[WORKER_SPEC] = json.dumps({"spec": asdict(spec), "options": asdict(options) | {
                                              "precision": options.precision.value}, "api_key": api_key})
    log.info("starting %d worker processes, each loading %s", options.workers, spec.name)
    # a worker answers the supervisor's health checks once torch is imported (seconds on a loaded machine)
    uvicorn.run("elmo.serving.service:worker_app", factory=True, workers=options.workers,
                timeout_worker_healthcheck=120, **common)


def worker_app():
    """In a worker process: the app over this process's own model (uvicorn calls this factory)."""
    from elmo.serving.app import create_app

    given = json.loads(os.environ[WORKER_SPEC])
    options = ServeOptions(**given["options"])
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // options.workers))  # the workers share the cores
    spec = ModelSpec(**given["spec"])
    embedder = Embedder(spec.load(), options.embed_options(), device=spec.device, model_name=spec.name)
    return create_app(embedder, options, spec.name, given["api_key"])

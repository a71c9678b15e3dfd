"""``elmo serve``: the embedding service (docs/serving.md); and the ``elmo embed --server`` embedder."""

from __future__ import annotations

import argparse
import logging
import os
import signal

from elmo.cli.model_args import add_model_args, model_ref
from elmo.cli.setting_flags import add_flag, add_setting_flags, settings_from_args
from elmo.embedding.embed_options import EmbedOptions
from elmo.errors import ElmoError, Interrupted
from elmo.runtime.extras import require
from elmo.serving.serve_options import ServeOptions
from elmo.shared_settings import DEVICE

log = logging.getLogger("elmo")


def cmd_serve(args: argparse.Namespace) -> int:
    for module in ("starlette", "uvicorn"):  # the serve extra: one line, before the model loads
        require(module, "serve", "elmo serve")
    from elmo.serving.service import ModelSpec, bind_listeners, run_service

    options = ServeOptions(**settings_from_args(ServeOptions, args))
    api_key = args.api_key or os.environ.get("ELMO_API_KEY") or None
    spec = ModelSpec(model_ref(args), device=args.device)
    # a host that does not resolve or is not this machine's, or a port in use: one line, before the model loads
    listeners = bind_listeners(options.host, options.port)
    try:
        bilm = spec.load()  # a model that does not load fails here, in one line, before any worker starts
        if options.workers > 1:
            bilm = None  # each worker loads its own
        if options.host not in ("127.0.0.1", "localhost", "::1") and api_key is None:
            log.warning("listening on %s without --api-key: anyone who can reach this port can use the service",
                        options.host)
        stopped_by = run_service(spec, options, api_key, listeners, bilm)
    finally:
        for listener in listeners:
            listener.close()
    if signal.SIGINT in stopped_by:  # Ctrl-C: 130, as any interrupted command; SIGTERM, a service's normal stop: 0
        raise Interrupted("the service stopped by SIGINT after answering every request it had received",
                          signal.SIGINT)
    return 0


def remote_embedder(args: argparse.Namespace, options: EmbedOptions):
    """``elmo embed --server URL``: the embedder that sends each batch to the service."""
    from elmo.client import ElmoClient
    from elmo.serving.remote import RemoteEmbedder

    given = [flag for flag, value in (("--model", args.model), ("--options-file", args.options_file),
                                      ("--weight-file", args.weight_file), ("--device", args.device),
                                      ("--align", getattr(args, "align", None))) if value]
    if given:
        raise ElmoError(f"--server embeds with the service's model and device: drop {given[0]}")
    return RemoteEmbedder(ElmoClient(args.server), options)


def add_serve_commands(commands) -> None:
    serve = commands.add_parser(
        "serve", help="an HTTP embedding service with dynamic batching (needs the serve extra; docs/serving.md)",
        description="POST /v1/embed, GET /v1/model, /healthz, /readyz, /metrics, /openapi.json, and a page that "
        "explores the model's vectors at / (--no-page: none). Concurrent requests are merged "
        "into token-budget batches; every sentence gets the vectors `elmo embed` gives it. SIGTERM: stop "
        "accepting, answer what was received, exit 0; Ctrl-C (SIGINT) the same, exit 130.",
    )
    add_model_args(serve)
    add_setting_flags(serve, ServeOptions, ["host", "port", "workers", "page"])
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every request but "
                       "the page's files (default: $ELMO_API_KEY if set; the environment variable keeps the key out "
                       "of `ps`)")
    add_flag(serve, "device", DEVICE)
    batching = serve.add_argument_group("batching")
    add_setting_flags(batching, ServeOptions, ["max_batch_tokens", "max_batch_sentences", "max_wait_ms",
                                               "separate_requests", "vocab_cache"])
    add_setting_flags(batching, ServeOptions, ["precision", "initial_state"])
    limits = serve.add_argument_group("limits")
    add_setting_flags(limits, ServeOptions, ["max_queue", "max_request_sentences", "max_sentence_tokens",
                                             "max_request_tokens", "max_request_bytes", "body_timeout", "access_log"])
    serve.set_defaults(func=cmd_serve)

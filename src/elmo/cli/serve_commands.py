"""``elmo serve``: the embedding service (docs/serving.md); and the ``elmo embed --server`` embedder."""

from __future__ import annotations

import argparse
import logging
import os

from elmo.cli.model_args import add_model_args, load_model, model_name
from elmo.cli.setting_flags import add_flag, add_setting_flags, settings_from_args
from elmo.embedding.embed_options import EmbedOptions
from elmo.errors import ElmoError
from elmo.runtime.extras import require
from elmo.serving.serve_options import ServeOptions
from elmo.shared_settings import DEVICE

log = logging.getLogger("elmo")


def cmd_serve(args: argparse.Namespace) -> int:
    for module in ("starlette", "uvicorn"):  # the serve extra: one line, before the model loads
        require(module, "serve", "elmo serve")
    from elmo.serving.service import run_service

    options = ServeOptions(**settings_from_args(ServeOptions, args))
    api_key = args.api_key or os.environ.get("ELMO_API_KEY") or None
    bilm = load_model(args)  # a model that does not load fails here, in one line, before any worker starts
    spec = model_spec(args)
    if options.workers > 1:
        bilm = None  # each worker loads its own
    if options.host not in ("127.0.0.1", "localhost", "::1") and api_key is None:
        log.warning("listening on %s without --api-key: anyone who can reach this port can use the service",
                    options.host)
    run_service(spec, options, api_key, bilm)
    return 0


def model_spec(args: argparse.Namespace):
    """What the model flags name, as each worker process will load it (the same rules as ``load_model``). Its name,
    shown to clients, is the published name or the last part of the path (not the server's directories)."""
    from elmo.formats.published import demo_model_dir, resolve_model
    from elmo.serving.service import ModelSpec

    name = model_name(args)
    if args.model and not (args.options_file or args.weight_file):
        return ModelSpec(name, model_dir=str(resolve_model(args.model)), device=args.device)
    if args.options_file and args.weight_file and not args.model:
        return ModelSpec(name, options_file=args.options_file, weight_file=args.weight_file, device=args.device)
    return ModelSpec(name, model_dir=str(demo_model_dir()), device=args.device)


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
        description="POST /v1/embed, GET /v1/model, /healthz, /readyz, /metrics. Concurrent requests are merged "
        "into token-budget batches; every sentence gets the vectors `elmo embed` gives it. SIGTERM: stop "
        "accepting, answer what is queued, exit 0.",
    )
    add_model_args(serve)
    add_setting_flags(serve, ServeOptions, ["host", "port", "workers"])
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every request "
                       "(default: $ELMO_API_KEY if set; the environment variable keeps the key out of `ps`)")
    add_flag(serve, "device", DEVICE)
    batching = serve.add_argument_group("batching")
    add_setting_flags(batching, ServeOptions, ["max_batch_tokens", "max_batch_sentences", "max_wait_ms",
                                               "separate_requests", "vocab_cache"])
    add_setting_flags(batching, ServeOptions, ["precision", "initial_state"])
    limits = serve.add_argument_group("limits")
    add_setting_flags(limits, ServeOptions, ["max_queue", "max_request_sentences", "max_sentence_tokens",
                                             "max_request_tokens", "max_request_bytes", "access_log"])
    serve.set_defaults(func=cmd_serve)

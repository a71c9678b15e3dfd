"""The HTTP API of ``elmo serve`` as a Starlette app: routes, the API key, the JSON and binary answers.

    POST /v1/embed   {"sentences": [...], "layer": "all"|"top"|"average"|"mix"|N, "pool": "none"|"mean"|...,
                      "dtype": "float32"|"float16"}   (docs/serving.md has every field)
    GET  /v1/model   the model's name, layers, dimension, precision and the service's limits
    GET  /healthz    the process is up        GET /readyz   the model is loaded and warm (503 until then, and
                                                            again from the moment SIGTERM or SIGINT arrives)
    GET  /metrics    Prometheus text format

The vectors come from :class:`~elmo.embedding.embedder.Embedder` through the :class:`DynamicBatcher`, and
the request's ``layer``/``pool`` pick what to send as ``elmo embed --layer/--pool`` do
(:class:`~elmo.embedding.selection.VectorSelection`), so a sentence gets the same array as in ``elmo embed``'s HDF5
file. The binary answer (``Accept: application/x-npy``) and every error are documented in
docs/serving.md.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import numpy as np

from elmo.embedding.contract import SentenceEmbedder
from elmo.errors import MissingExtraError
from elmo.runtime.extras import install_hint
from elmo.serving.batcher import DynamicBatcher, QueueFull
from elmo.serving.metrics import Metrics
from elmo.serving.requests import RequestError, check_for_model, parse_embed_request, too_large
from elmo.serving.serve_options import ServeOptions

try:  # the serve extra; this module is imported only where a service starts (elmo.serving.service)
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
except ImportError as e:
    raise MissingExtraError(install_hint("starlette", "serve", "elmo serve")) from e

NPY = "application/x-npy"
CLIENT_GONE = 499
"""Logged for a request whose client disconnected (nginx's convention); nobody receives it."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def encode_npy(arrays: list[np.ndarray]) -> bytes:
    """The binary answer: one .npy file (format 1.0) per sentence, concatenated in request order."""
    out = io.BytesIO()
    for array in arrays:
        np.lib.format.write_array(out, np.ascontiguousarray(array), version=(1, 0), allow_pickle=False)
    return out.getvalue()


def create_app(
    embedder: SentenceEmbedder, options: ServeOptions, model_name: str, api_key: str | None = None
) -> Starlette:
    """The service over ``embedder``; ``api_key``: every request must carry ``Authorization: Bearer KEY``."""
    metrics = Metrics()
    header_name = model_name.encode("ascii", "backslashreplace").decode()  # HTTP headers are Latin-1 at most
    provenance = embedder.provenance()
    # every answer says what computed its vectors: a bf16 service gives other numbers than an fp32 one
    made_by = {"X-Elmo-Precision": provenance["precision"], "X-Elmo-Device": provenance["device"]}

    @asynccontextmanager
    async def lifespan(app: Starlette):
        batcher = DynamicBatcher(embedder, options, metrics)
        batcher.start()
        app.state.batcher = batcher
        app.state.draining = False

        def draining() -> None:  # in a signal handler: no I/O on the event loop, only flags
            app.state.draining = True
            metrics.ready = 0

        restore = _before_stop_signals(draining)
        try:
            yield
        finally:
            restore()
        await batcher.stop()  # uvicorn has let every open request finish; this ends the model thread

    async def embed(request: Request) -> Response:
        try:
            parsed = parse_embed_request(await _body(request, options.max_request_bytes), options)
            check_for_model(parsed.selection, embedder.num_layers)
        except RequestError as e:
            metrics.bad_requests[e.reason] += 1
            return error(e.status, e.message)
        except ClientDisconnect:  # gone before its body arrived: nothing was queued, nobody to answer
            metrics.cancelled_requests += 1
            return Response(status_code=CLIENT_GONE)
        started = time.monotonic()
        try:
            future = request.app.state.batcher.submit(parsed)
        except QueueFull as e:
            return error(503, f"the service is busy: {options.max_queue} requests are waiting (--max-queue); "
                              f"retry after {e.retry_after} s", {"Retry-After": str(e.retry_after)})
        disconnected = asyncio.ensure_future(_client_gone(request))
        try:
            await asyncio.wait({future, disconnected}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            disconnected.cancel()
            if not future.done():  # the client went away (or this task was cancelled): drop the work
                future.cancel()
                metrics.cancelled_requests += 1
        if future.cancelled():
            return Response(status_code=CLIENT_GONE)
        if future.exception() is not None:
            return error(500, f"embedding failed: {future.exception()}")
        arrays = [parsed.selection.apply(layers) for layers in future.result()]
        metrics.latency.observe(time.monotonic() - started)
        headers = {"X-Elmo-Model": header_name, "X-Elmo-Count": str(len(arrays)), **made_by}
        if NPY in request.headers.get("accept", ""):
            return Response(encode_npy(arrays), media_type=NPY, headers=headers)
        return JSONResponse({"model": model_name, "precision": provenance["precision"],
                             "device": provenance["device"], **parsed.selection.describe(),
                             "shapes": [list(a.shape) for a in arrays],
                             "embeddings": [a.tolist() for a in arrays]}, headers=headers)

    async def model(request: Request) -> Response:
        return JSONResponse({
            "model": model_name, "num_layers": embedder.num_layers, "output_dim": embedder.output_dim,
            "precision": provenance["precision"], "device": provenance["device"],
            "initial_state": provenance["initial_state"],
            "limits": {name: getattr(options, name) for name in (
                "max_request_sentences", "max_sentence_tokens", "max_request_tokens", "max_request_bytes", "max_queue",
                "max_batch_tokens", "max_batch_sentences", "max_wait_ms")},
        })

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        # not ready from the moment a stop signal came (uvicorn closes the listener at its next 0.1 s tick)
        ready = request.app.state.batcher.ready and not request.app.state.draining
        return JSONResponse({"ready": ready, "model": model_name}, status_code=200 if ready else 503)

    async def metrics_text(request: Request) -> Response:
        return PlainTextResponse(metrics.text(), media_type="text/plain; version=0.0.4")

    app = Starlette(routes=[
        Route("/v1/embed", embed, methods=["POST"]),
        Route("/v1/model", model, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ], lifespan=lifespan)
    app.add_middleware(Guard, metrics=metrics, api_key=api_key)
    return app


class Guard:
    """ASGI middleware: refuses requests without the API key (401) and counts every response by path and status
    (a 500 from an unexpected exception included).

    The scheme of ``Authorization: Bearer KEY`` is case-insensitive (RFC 7235 section 2.1: ``bearer``, ``BEARER``);
    the key is compared in constant time.
    """

    def __init__(self, app: Callable, metrics: Metrics, api_key: str | None) -> None:
        self.app = app
        self.metrics = metrics
        self.expected = api_key.encode() if api_key else None

    async def __call__(self, scope: dict, receive: Callable, send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        if self.expected is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, key = given.partition(b" ")
            # compare_digest runs for every request, whatever the scheme, so the time says nothing about the key
            key_matches = hmac.compare_digest(key.lstrip(b" "), self.expected)
            if not (key_matches and scheme.lower() == b"bearer"):
                self.metrics.responses[path, 401] += 1
                problem = "is missing" if not given else "is wrong"
                response = error(401, f"the API key {problem}: send 'Authorization: Bearer KEY'",
                                 {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return

        started = False

        async def counting_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.responses[path, message["status"]] += 1
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if not started:  # Starlette's outer middleware answers 500: count it too
                self.metrics.responses[path, 500] += 1
            raise


KNOWN_PATHS = ("/v1/embed", "/v1/model", "/healthz", "/readyz", "/metrics")


def _before_stop_signals(callback: Callable[[], None]) -> Callable[[], None]:
    """Runs ``callback`` first whenever SIGTERM or SIGINT arrives, then the handler installed before (uvicorn's,
    which starts the graceful shutdown); returns what puts the previous handlers back.

    Called from the lifespan startup, inside uvicorn's ``capture_signals`` (so in each worker process too); off the
    main thread (an app run in a test client) signals cannot be handled and nothing is changed.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {}
    for number in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(number)
        if not callable(handler):
            continue

        def chained(signum, frame, handler=handler):
            callback()
            handler(signum, frame)

        previous[number] = handler
        signal.signal(number, chained)

    def restore() -> None:
        if threading.current_thread() is threading.main_thread():
            for number, handler in previous.items():
                signal.signal(number, handler)

    return restore


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` bytes, before the rest is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body is read by then, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass

"""The HTTP API of ``elmo serve`` as a Starlette app: routes, the API key, the JSON and binary answers.

    POST /v1/embed   {"sentences": [...], "layer": "all"|"top"|"average"|"mix"|N, "pool": "none"|"mean"|...,
                      "dtype": "float32"|"float16"}   (docs/serving.md has every field)
    GET  /v1/model   the model's name, layers, dimension, precision and the service's limits
    GET  /healthz    the process is up        GET /readyz   the model is loaded and warm (503 until then, and
                                                            again from the moment SIGTERM or SIGINT arrives)
    GET  /metrics    Prometheus text format
    GET  /openapi.json   the OpenAPI 3.1 document of all this (serving/openapi.py)
    GET  /           the page that explores the model's vectors, and its files under /page/ (serving/page.py;
                     off with --no-page); they load without the API key

The vectors come from :class:`~elmo.embedding.embedder.Embedder` through the :class:`DynamicBatcher`, and
the request's ``layer``/``pool`` pick what to send as ``elmo embed --layer/--pool`` do
(:class:`~elmo.embedding.selection.VectorSelection`), so a sentence gets the same array as in ``elmo embed``'s HDF5
file. The binary answer (``Accept: application/x-npy``) and every error are documented in
docs/serving.md: every refusal, an unknown path (404), a wrong method (405) and an unexpected failure (500)
included, is one JSON line ``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import json
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import numpy as np

from elmo.config import BiLMConfig
from elmo.embedding.contract import SentenceEmbedder
from elmo.embedding.embedder import Embedder
from elmo.errors import MissingExtraError
from elmo.runtime.extras import install_hint
from elmo.serving.batcher import DynamicBatcher, QueueFull
from elmo.serving.metrics import Metrics
from elmo.serving.openapi import openapi_document
from elmo.serving.page import HEADERS, page_files
from elmo.serving.requests import RequestError, check_answer, check_for_model, parse_embed_request, too_large, too_slow
from elmo.serving.serve_options import LIMITS, ServeOptions

try:  # the serve extra; this module is imported only where a service starts (elmo.serving.service)
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
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
            body = await _body(request, options.max_request_bytes, options.body_timeout)
            parsed = parse_embed_request(body, options)
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
        try:
            check_answer(arrays, parsed.selection)
        except RequestError as e:
            metrics.bad_requests[e.reason] += 1
            return error(e.status, e.message)
        metrics.latency.observe(time.monotonic() - started)
        headers = {"X-Elmo-Model": header_name, "X-Elmo-Count": str(len(arrays)), **made_by}
        if NPY in request.headers.get("accept", ""):
            return Response(encode_npy(arrays), media_type=NPY, headers=headers)
        return JSONResponse({"model": model_name, "precision": provenance["precision"],
                             "device": provenance["device"], **parsed.selection.describe(),
                             "shapes": [list(a.shape) for a in arrays],
                             "embeddings": [a.tolist() for a in arrays]}, headers=headers)

    card = {"model": model_name, **model_facts(embedder), "num_layers": embedder.num_layers,
            "output_dim": embedder.output_dim, "precision": provenance["precision"], "device": provenance["device"],
            "initial_state": provenance["initial_state"], "limits": {name: getattr(options, name) for name in LIMITS}}

    async def model(request: Request) -> Response:
        return JSONResponse(card)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        # not ready from the moment a stop signal came (uvicorn closes the listener at its next 0.1 s tick)
        ready = request.app.state.batcher.ready and not request.app.state.draining
        return JSONResponse({"ready": ready, "model": model_name}, status_code=200 if ready else 503)

    async def metrics_text(request: Request) -> Response:
        return PlainTextResponse(metrics.text(), media_type="text/plain; version=0.0.4")

    document = json.dumps(openapi_document(options, embedder.num_layers, api_key is not None, options.page)).encode()

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    files = page_files(api_key is not None) if options.page else {}

    async def page_file(request: Request) -> Response:
        file = files[request.url.path]
        return Response(file.body, media_type=file.media_type, headers=HEADERS)

    routes = [
        Route("/v1/embed", embed, methods=["POST"]),
        Route("/v1/model", model, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *(Route(path, page_file, methods=["GET"]) for path in files),
    ]
    methods = {route.path: sorted(route.methods - {"HEAD"}) for route in routes}

    async def refused(request: Request, e: HTTPException) -> Response:
        """Starlette's own refusals (an unknown path, a wrong method) in the service's JSON shape."""
        path = _clip(request.url.path)
        if e.status_code == 404:
            message = f"no such path: {path} (the API: {', '.join(p for p in methods if not p.startswith('/page/'))})"
        elif e.status_code == 405:
            message = f"{request.method} is not allowed on {path}: use {' or '.join(methods.get(path, ['GET']))}"
        else:
            message = e.detail
        return error(e.status_code, message, dict(e.headers or {}))

    async def failed(request: Request, e: Exception) -> Response:
        """An unexpected exception: still the JSON shape (uvicorn logs the traceback); nothing internal is told."""
        return error(500, f"the service failed on this request ({type(e).__name__}); its log has the details")

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: refused, Exception: failed})
    app.add_middleware(Guard, metrics=metrics, api_key=api_key, paths=[route.path for route in routes],
                       public=list(files))
    return app


def model_facts(embedder: SentenceEmbedder) -> dict[str, object]:
    """What the model card says beyond the embedder's contract: the model's family (:func:`model_family`) and the
    scalar mix it was trained with (a TF-Hub module's), which the page offers as a layer. Unknown (None) for an
    embedder that holds no biLM here."""
    if not isinstance(embedder, Embedder):
        return {"family": None, "mix": None}
    mix = embedder.model.default_mix
    return {"family": model_family(embedder.model.config), "mix": None if mix is None else {
        "weights": list(mix.weights), "gamma": mix.gamma, "source": mix.source}}


def model_family(config: BiLMConfig | None) -> str | None:
    """The family, told by the token encoder: ``bilm-tf`` (characters; ``bilm-tf (word input)`` without a char CNN)
    or ``manylangs`` (ELMoForManyLangs' words and characters), as ``elmo models --family`` names them."""
    if config is None:
        return None
    if config.manylangs is not None:
        return "manylangs"
    return "bilm-tf" if config.char_cnn is not None else "bilm-tf (word input)"


class Guard:
    """ASGI middleware: refuses requests without the API key (401), except for the ``public`` paths (the page's
    files), counts every response by path and status (a 500 from an unexpected exception included; paths outside
    ``paths`` are counted as ``other``, so a scan of random URLs adds no series), and closes the connection after an
    answer sent before the request's body was read.

    The scheme of ``Authorization: Bearer KEY`` is case-insensitive (RFC 7235 section 2.1: ``bearer``, ``BEARER``);
    the key is compared in constant time.
    """

    def __init__(self, app: Callable, metrics: Metrics, api_key: str | None, paths: Sequence[str],
                 public: Sequence[str] = ()) -> None:
        self.app = app
        self.metrics = metrics
        self.expected = api_key.encode() if api_key else None
        self.paths = frozenset(paths)
        self.public = frozenset(public)

    async def __call__(self, scope: dict, receive: Callable, send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in self.paths else "other"
        started = False
        body_read = not any(name in (b"content-length", b"transfer-encoding") and value != b"0"
                            for name, value in scope["headers"])

        async def watching_receive() -> dict:
            nonlocal body_read
            message = await receive()
            body_read = body_read or message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def counting_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.responses[path, message["status"]] += 1
                # an answer before the whole body came (401, 404, 405, 408, 413) closes the connection after it:
                # else it would wait for the rest of a body nobody reads, and a trickle would hold it open
                if not body_read:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        if self.expected is not None and path not in self.public:
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, key = given.partition(b" ")
            # compare_digest runs for every request, whatever the scheme, so the time says nothing about the key
            key_matches = hmac.compare_digest(key.lstrip(b" "), self.expected)
            if not (key_matches and scheme.lower() == b"bearer"):
                problem = "is missing" if not given else "is wrong"
                response = error(401, f"the API key {problem}: send 'Authorization: Bearer KEY'",
                                 {"WWW-Authenticate": "Bearer"})
                await response(scope, watching_receive, counting_send)
                return
        try:
            await self.app(scope, watching_receive, counting_send)
        except Exception:
            if not started:  # Starlette's outer middleware answers 500: count it too
                self.metrics.responses[path, 500] += 1
            raise


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


async def _body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` bytes, before the rest is read, and (408) when
    it has not all arrived ``timeout`` seconds after the headers: a client that sends half a body, or a byte now and
    then, holds its connection (and a graceful stop) no longer than that."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(size, limit)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise too_slow(timeout) from None


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body is read by then, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass

"""``GET /openapi.json``: the OpenAPI 3.1 document of the running service, made from the declarations the service
checks requests with, so it cannot say something the service does not do:

* the request body: :func:`elmo.serving.requests.request_schema` (the fields the parser accepts, their choices and
  defaults from :class:`~elmo.embedding.selection.VectorSelection`, this service's limits from its
  :class:`ServeOptions`);
* the answers: the selection fields an answer echoes (``VectorSelection``), the ``limits`` of ``/v1/model``
  (:data:`~elmo.serving.serve_options.LIMITS`, typed and described by their settings), the model's layers;
* the refusals: the reasons ``/metrics`` counts (:data:`~elmo.serving.requests.REASONS`) and example messages made by
  the parser itself from bad bodies;
* the request examples, which the tests send (each must get a 200).
"""

from __future__ import annotations

import json
import typing

from elmo import __version__
from elmo.embedding.selection import DTYPES, POOLS
from elmo.serving.requests import REASONS, RequestError, check_for_model, parse_embed_request, request_schema, too_slow
from elmo.serving.serve_options import LIMITS, ServeOptions
from elmo.settings import setting_of, settings_of

JSON = "application/json"
NPY = "application/x-npy"


def openapi_document(options: ServeOptions, num_layers: int, api_key_required: bool, page: bool) -> dict:
    """The document of a service with ``options`` over a model of ``num_layers`` layers (L + 1)."""
    schemas = {
        "EmbedRequest": request_schema(options, num_layers),
        "EmbedAnswer": _embed_answer(num_layers),
        "ModelAnswer": _model_answer(num_layers),
        "Error": _object({"error": {"type": "string", "description": "one line naming what is wrong"}}),
        "Nested": {"anyOf": [{"type": "number"}, {"type": "array", "items": {"$ref": "#/components/schemas/Nested"}}]},
    }
    document = {
        "openapi": "3.1.0",
        "info": {"title": "elmo serve", "version": __version__,
                 "summary": "ELMo vectors over HTTP: concurrent requests are merged into token-budget batches, and "
                            "every sentence gets the vectors `elmo embed` gives it",
                 "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}},
        "servers": [{"url": "/"}],
        "paths": _paths(options, num_layers, api_key_required, page),
        "components": {"schemas": schemas},
    }
    if api_key_required:
        document["components"]["securitySchemes"] = {"bearer": {
            "type": "http", "scheme": "bearer", "description": "the service's API key (`--api-key` or "
                                                               "`ELMO_API_KEY`); the scheme in any case"}}
        document["security"] = [{"bearer": []}]
    return document


def request_examples(num_layers: int) -> dict[str, dict]:
    """Named request bodies that together use every field; each gets a 200 from a service of ``num_layers``."""
    sentences = [["The", "bank", "."], "I went to the river bank"]
    return {
        "tokens and strings": {"sentences": sentences, "layer": "top"},
        "every layer of one sentence": {"sentences": ["The bank raised its rates ."]},
        "sentence vectors": {"sentences": sentences, "layer": "average", "pool": "mean"},
        "one layer, half precision": {"sentences": sentences, "layer": num_layers - 1, "dtype": "float16"},
        "a scalar mix": {"sentences": sentences, "layer": "mix", "mix_weights": [0.0] * num_layers,
                         "mix_gamma": 0.5},
        "the older name of layer": {"sentences": sentences, "output": "top", "pool": "first-last"},
    }


def _paths(options: ServeOptions, num_layers: int, api_key_required: bool, page: bool) -> dict:
    refused = {"400": _error("the body is not a valid request (`elmo_bad_requests_total{reason}`: "
                             f"{', '.join(r for r in REASONS if r not in ('too_large', 'too_slow'))})", {
                                 "unknown field": b'{"sentences": [["a"]], "layers": "top"}',
                                 "empty token": b'{"sentences": [["a", ""]]}',
                                 "layer the model lacks": json.dumps({"sentences": [["a"]],
                                                                      "layer": num_layers}).encode(),
                                 "nesting": b"[" * 20,
                                 "a mix field without layer mix": b'{"sentences": [["a"]], "mix_gamma": 2}'},
                             options, num_layers, status=400),
               "408": _error("the whole body did not arrive within `--body-timeout` seconds of the headers "
                             "(`reason=\"too_slow\"`); the connection is closed after this answer",
                             status=408, refusals={"body too slow": too_slow(options.body_timeout)}),
               "413": _error("over a limit: body bytes, sentences, tokens per sentence or per request "
                             "(`reason=\"too_large\"`)", {
                                 "sentence too long": json.dumps(
                                     {"sentences": [["x"] * (options.max_sentence_tokens + 1)]}).encode(),
                                 "too many sentences": json.dumps(
                                     {"sentences": [["x"]] * (options.max_request_sentences + 1)}).encode()},
                             options, num_layers, status=413),
               "500": _error("the model failed on the batch that held this request's sentences"),
               "503": _error("`--max-queue` requests are already waiting", headers={"Retry-After": {
                   "description": "seconds until the queue has likely drained (at least 1)",
                   "schema": {"type": "integer", "minimum": 1}}})}
    if api_key_required:
        refused["401"] = _error("the `Authorization: Bearer KEY` header is missing or wrong", headers={
            "WWW-Authenticate": {"schema": {"const": "Bearer"}}})
    made_by = {name: {"description": text, "schema": {"type": "string"}} for name, text in (
        ("X-Elmo-Model", "the model's name"), ("X-Elmo-Precision", "what computed the vectors: fp32 or bf16"),
        ("X-Elmo-Device", "cpu, cuda:0, ..."), ("X-Elmo-Count", "the number of sentences answered"))}
    examples = {name: {"value": body} for name, body in request_examples(num_layers).items()}
    paths = {
        "/v1/embed": {"post": {
            "summary": "the vectors of the request's sentences, in request order",
            "operationId": "embed",
            "requestBody": {"required": True, "content": {JSON: {
                "schema": {"$ref": "#/components/schemas/EmbedRequest"}, "examples": examples}}},
            "responses": {"200": {
                "description": f"JSON; or with `Accept: {NPY}`, one .npy file (format 1.0, little-endian float32 or "
                               "float16, no pickles) per sentence, concatenated",
                "headers": made_by,
                "content": {JSON: {"schema": {"$ref": "#/components/schemas/EmbedAnswer"}},
                            NPY: {"schema": {"type": "string", "contentMediaType": NPY}}}}, **refused}}},
        "/v1/model": {"get": {"summary": "the model and the service's limits", "operationId": "model",
                              "responses": _ok("the model card", "#/components/schemas/ModelAnswer")}},
        "/healthz": {"get": {"summary": "the process is up", "operationId": "healthz", "responses": _ok(
            "up", schema=_object({"status": {"const": "ok"}}))}},
        "/readyz": {"get": {"summary": "the model is loaded and warm", "operationId": "readyz", "responses": {
            **_ok("ready", schema=_ready(True)),
            "503": {"description": "not yet, or stopping (from the moment SIGTERM or SIGINT arrives)",
                    "content": {JSON: {"schema": _ready(False)}}}}}},
        "/metrics": {"get": {"summary": "Prometheus text format (per worker process)", "operationId": "metrics",
                             "responses": {"200": {"description": "the counters, gauges and histograms",
                                                   "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/openapi.json": {"get": {"summary": "this document", "operationId": "openapi", "responses": {
            "200": {"description": "OpenAPI 3.1", "content": {JSON: {"schema": {"type": "object"}}}}}}},
    }
    if page:
        paths["/"] = {"get": {"summary": "the page that explores the model's vectors (and its files under /page/); "
                                         "no API key needed", "operationId": "page", "security": [],
                              "responses": {"200": {"description": "HTML",
                                                    "content": {"text/html": {"schema": {"type": "string"}}}}}}}
    if api_key_required:
        for operations in paths.values():
            for operation in operations.values():
                if operation.get("security") != []:
                    operation["responses"]["401"] = refused["401"]
    return paths


def _embed_answer(num_layers: int) -> dict:
    echoed = {"layer": {"type": "string", "description": "all, top, average, mix or the index asked for"},
              "pool": {"enum": list(POOLS)},
              "mix_weights": {"type": ["array", "null"], "items": {"type": "number"}, "maxItems": num_layers},
              "mix_gamma": {"type": "number"},
              "dtype": {"enum": list(DTYPES)}}
    return _object({
        "model": {"type": "string"}, "precision": {"type": "string", "examples": ["fp32", "bf16"]},
        "device": {"type": "string", "examples": ["cpu", "cuda:0"]}, **echoed,
        "shapes": {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                   "description": "each sentence's array shape: (L + 1, n, 2P) for all, (n, 2P), pooled without n"},
        "embeddings": {"type": "array", "items": {"$ref": "#/components/schemas/Nested"},
                       "description": "one nested list per sentence, in request order"}})


def _model_answer(num_layers: int) -> dict:
    hints = typing.get_type_hints(ServeOptions)
    limit_settings = {f.name: setting_of(f) for f in settings_of(ServeOptions) if f.name in LIMITS}
    limits = {name: {"type": "integer" if hints[name] is int else "number",
                     "description": limit_settings[name].help} for name in LIMITS}
    return _object({
        "model": {"type": "string"}, "family": {"type": ["string", "null"], "examples": ["bilm-tf", "manylangs"]},
        "num_layers": {"const": num_layers, "description": "L + 1: the token layer and one per LSTM layer"},
        "output_dim": {"type": "integer", "description": "2P: forward and backward halves"},
        "precision": {"type": "string"}, "device": {"type": "string"}, "initial_state": {"enum": ["zero", "warm"]},
        "mix": {"description": "the scalar mix the model was trained with (a TF-Hub module's), else null",
                "anyOf": [{"type": "null"}, _object({
                    "weights": {"type": "array", "items": {"type": "number"}, "minItems": num_layers,
                                "maxItems": num_layers, "description": "before the softmax, token layer first"},
                    "gamma": {"type": "number"}, "source": {"type": "string"}})]},
        "limits": _object(limits)})


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _ready(ready: bool) -> dict:
    return _object({"ready": {"const": ready}, "model": {"type": "string"}})


def _ok(description: str, ref: str | None = None, schema: dict | None = None) -> dict:
    return {"200": {"description": description, "content": {JSON: {"schema": schema or {"$ref": ref}}}}}


def _error(description: str, bodies: dict[str, bytes] | None = None, options: ServeOptions | None = None,
           num_layers: int = 0, headers: dict | None = None, status: int | None = None,
           refusals: dict[str, RequestError] | None = None) -> dict:
    """A refusal; ``bodies``: bad requests whose messages, as the parser words them, become the examples (those the
    parser refuses with ``status``: with a tiny byte limit, every body is a 413); ``refusals``: more examples, made
    by the service's own refusal (a body too slow is no body the parser sees)."""
    content: dict = {"schema": {"$ref": "#/components/schemas/Error"}}
    refusals = {**{name: _refusal(body, options, num_layers) for name, body in (bodies or {}).items()},
                **(refusals or {})}
    examples = {name: {"value": {"error": e.message}} for name, e in refusals.items() if e.status == status}
    if examples:
        content["examples"] = examples
    return {"description": description, "content": {JSON: content}, **({"headers": headers} if headers else {})}


def _refusal(body: bytes, options: ServeOptions, num_layers: int) -> RequestError:
    try:
        check_for_model(parse_embed_request(body, options).selection, num_layers)
    except RequestError as e:
        return e
    raise AssertionError(f"{body[:40]!r} was accepted")  # an example of a refusal must be refused

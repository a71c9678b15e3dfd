"""``GET /openapi.json``: a valid OpenAPI 3.1 document (openapi-spec-validator) that says what the service does:
its request examples get 200s whose answers fit the answer schemas, every documented request field is accepted and
every other one refused, its limits and refusal messages are the running service's; and ``--no-page``."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from elmo.cli import build_parser
from elmo.cli.setting_flags import settings_from_args
from elmo.serving.openapi import openapi_document
from elmo.serving.requests import FIELDS, RequestError, parse_embed_request
from elmo.serving.serve_options import ServeOptions
from tests.serving.conftest import API_KEY


@pytest.fixture(scope="module")
def document(service) -> dict:
    status, headers, body = service.get("/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    return json.loads(body)


def schema_check(document: dict, name: str, instance: object) -> None:
    """``instance`` fits ``#/components/schemas/NAME`` of the document (JSON Schema 2020-12, as OpenAPI 3.1)."""
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    errors = [e.message for e in Draft202012Validator(root).iter_errors(instance)]
    assert errors == [], (name, errors[:3])


def test_the_document_is_valid_openapi_3_1(document):
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    assert document["openapi"] == "3.1.0"
    assert document["security"] == [{"bearer": []}]  # this service has an API key
    scheme = document["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert document["paths"]["/"]["get"]["security"] == []  # the page needs no key


def test_its_examples_get_200s_whose_answers_fit_the_answer_schema(service, document):
    examples = document["paths"]["/v1/embed"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    assert len(examples) >= 5
    for name, example in examples.items():
        schema_check(document, "EmbedRequest", example["value"])
        status, headers, answer = service.post_json(example["value"])
        assert status == 200, (name, answer)
        schema_check(document, "EmbedAnswer", answer)
        assert set(headers) >= {name.lower() for name in document["paths"]["/v1/embed"]["post"]["responses"]["200"][
            "headers"]}
    for path, schema in (("/v1/model", "ModelAnswer"),):
        status, _, body = service.get(path)
        assert status == 200
        schema_check(document, schema, json.loads(body))
    for path in ("/healthz", "/readyz"):
        answer = json.loads(service.get(path)[2])
        response = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert Draft202012Validator(response).is_valid(answer), (path, answer)


def test_every_documented_field_is_accepted_and_no_other(service, document):
    properties = document["components"]["schemas"]["EmbedRequest"]["properties"]
    assert tuple(properties) == FIELDS  # the parser's own list
    examples = document["paths"]["/v1/embed"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    assert set().union(*(example["value"] for example in examples.values())) == set(properties)  # each one sent
    for undocumented in ("layers", "Sentences", "mix_weight", "model", "precision", "device", "batch_size", ""):
        status, _, answer = service.post_json({"sentences": [["a"]], undocumented: "top"})
        assert status == 400 and answer["error"].startswith(f"unknown field {undocumented!r}"), answer
        schema_check(document, "Error", answer)


@given(st.text(max_size=20).filter(lambda key: key not in FIELDS))
def test_the_parser_refuses_any_field_the_document_does_not_name(key):
    properties = openapi_document(ServeOptions(), 3, False, True)["components"]["schemas"]["EmbedRequest"][
        "properties"]
    assert key not in properties
    with pytest.raises(RequestError) as e:
        parse_embed_request(json.dumps({"sentences": [["a"]], key: 1}).encode(), ServeOptions())
    assert (e.value.status, e.value.message) == (400, f"unknown field {key!r} (the fields are: {', '.join(FIELDS)})")


def test_limits_and_refusals_are_the_running_service_s(service, document):
    request = document["components"]["schemas"]["EmbedRequest"]
    assert request["properties"]["sentences"]["maxItems"] == 16  # the fixture's --max-request-sentences
    assert "20000 bytes" in request["description"] and "100 tokens in all" in request["description"]
    model = json.loads(service.get("/v1/model")[2])
    limits = document["components"]["schemas"]["ModelAnswer"]["properties"]["limits"]["properties"]
    assert set(limits) == set(model["limits"])
    responses = document["paths"]["/v1/embed"]["post"]["responses"]
    assert {"400", "401", "413", "500", "503"} <= set(responses)
    too_long = {"sentences": [["x"] * 41]}
    status, _, answer = service.post_json(too_long)
    assert status == 413
    assert answer["error"] in [e["value"]["error"] for e in
                               responses["413"]["content"]["application/json"]["examples"].values()]
    refused = service.request("GET", "/v1/model", headers={"Authorization": "Bearer wrong"})
    assert refused[0] == 401
    schema_check(document, "Error", json.loads(refused[2]))


def test_the_document_and_the_page_are_refused_or_absent_as_configured(service):
    headers, service.headers = service.headers, {}
    try:
        assert service.get("/openapi.json")[0] == 401  # like the API it describes
        assert service.get("/")[0] == 200  # the page loads without the key
    finally:
        service.headers = headers
    assert service.get("/", headers={"Authorization": f"Bearer {API_KEY}"})[0] == 200


def test_no_page_is_a_flag_of_the_setting():
    args = build_parser().parse_args(["serve", "--no-page"])
    assert ServeOptions(**settings_from_args(ServeOptions, args)).page is False
    assert build_parser().parse_args(["serve"]).page is True
    document = openapi_document(ServeOptions(page=False), 3, api_key_required=False, page=False)
    validate(document)
    assert "/" not in document["paths"] and "security" not in document


def test_no_page_serves_no_page(reference):
    from elmo.serving.app import create_app

    without, default = (create_app(reference, o, "demo") for o in (ServeOptions(page=False), ServeOptions()))
    assert [_status(without, path) for path in ("/", "/page/explore.js", "/openapi.json")] == [404, 404, 200]
    assert [_status(default, path) for path in ("/", "/page/explore.js", "/openapi.json")] == [200, 200, 200]


def _status(app, path: str) -> int:
    """The status of ``GET path`` from the ASGI app itself (no server, no lifespan: the page's routes need none)."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": [],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"]

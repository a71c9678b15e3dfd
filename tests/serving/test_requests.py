"""Checking a request body without a server: sentences split as ``elmo embed`` splits lines, defaults, limits."""

from __future__ import annotations

import json

import pytest

from elmo.serving.metrics import Histogram, Metrics
from elmo.serving.requests import EmbedRequest, RequestError, check_nesting, parse_embed_request
from elmo.serving.serve_options import ServeOptions
from elmo.settings import SettingError
from elmo.text.sentences import read_sentences


def test_strings_are_tokenised_like_elmo_embed_lines(tmp_path):
    texts = ["  The\u00a0bank\tis  here . ", "", "caf\u00e9 \u2014 ok"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    request = parse_embed_request(json.dumps({"sentences": texts}).encode(), ServeOptions())
    assert request == EmbedRequest([line.tokens for line in read_sentences(tmp_path / "in.txt")])
    assert request.tokens == 8


def test_limits_are_inclusive():
    limits = ServeOptions(max_request_sentences=2, max_sentence_tokens=3)
    assert parse_embed_request(b'{"sentences": [["a", "b", "c"], "d e f"]}', limits).tokens == 6
    with pytest.raises(RequestError) as e:
        parse_embed_request(b'{"sentences": ["a b c d"]}', limits)
    assert (e.value.status, e.value.message) == (413, "sentences[0] has 4 tokens, over the limit of 3 per sentence")


def test_options_are_checked():
    with pytest.raises(SettingError, match="max_queue must be >= 1, got 0") as e:
        ServeOptions(max_queue=0)
    assert e.value.command_line == "--max-queue must be >= 1, got 0"


def test_metrics_text_is_prometheus_format():
    histogram = Histogram("h", "help", (1, 2))
    for value in (0.5, 2, 3):
        histogram.observe(value)
    assert histogram.lines() == ["# HELP h help", "# TYPE h histogram", 'h_bucket{le="1"} 1', 'h_bucket{le="2"} 2',
                                 'h_bucket{le="+Inf"} 3', "h_sum 5.5", "h_count 3"]
    metrics = Metrics()
    metrics.responses["/v1/embed", 200] += 2
    assert 'elmo_requests_total{path="/v1/embed",code="200"} 2' in metrics.text().splitlines()
    metrics.bad_requests["nesting"] += 1
    lines = metrics.text().splitlines()
    assert 'elmo_bad_requests_total{reason="nesting"} 1' in lines
    assert 'elmo_bad_requests_total{reason="duplicate_key"} 0' in lines  # every reason, before it happens


@pytest.mark.parametrize("body, depth", [
    (b'{"sentences": [["a", "b"], "c d"]}', 3),
    (b'{"sentences": [["[[[[[[[[[[[[", "{{{{{{{{{{"]]}', 3),  # brackets in tokens do not count
    (b'{"sentences": [["\\"[[[[[[[[[[", "\\\\", "[[[[[[[[[["]]}', 3),  # nor after escaped quotes and backslashes
    (b"[" * 9, 9),
    (b'{"a": {"b": [[[[[[[1]]]]]]]}}', 9),
    (b"[]" * 100 + b"[" * 9, 9),
])
def test_nesting_is_measured_on_the_raw_bytes(body, depth):
    limit = ServeOptions(max_request_bytes=10**7)
    if depth <= 8:
        check_nesting(body)
        assert parse_embed_request(body, limit).tokens > 0
        return
    with pytest.raises(RequestError) as e:
        parse_embed_request(body, limit)
    assert (e.value.status, e.value.reason) == (400, "nesting")
    assert e.value.message == f"the body nests lists and objects {depth} deep, over the limit of 8 (a request needs 3)"


def test_a_million_brackets_are_refused_without_parsing():
    with pytest.raises(RequestError, match="1000000 deep"):
        check_nesting(b"[" * 1_000_000)


def test_an_unexpected_exception_is_counted_as_a_500():
    import asyncio

    from elmo.serving.app import Guard

    async def failing_app(scope, receive, send):
        raise RuntimeError("a bug")

    metrics = Metrics()
    scope = {"type": "http", "path": "/v1/embed", "headers": []}
    with pytest.raises(RuntimeError, match="a bug"):  # Starlette's outer middleware turns it into the 500
        asyncio.run(Guard(failing_app, metrics, api_key=None, paths=["/v1/embed"])(scope, None, None))
    assert metrics.responses["/v1/embed", 500] == 1


MIX_ONLY = [  # (body, what the parser says: None = accepted)
    ({"layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": 2}, None),
    ({"output": "mix", "mix_weights": [0, 0, 0]}, None),
    ({"layer": "top", "mix_gamma": 2}, "'mix_gamma' is for layer mix (got layer top)"),
    ({"layer": 1, "mix_gamma": 1.0}, "'mix_gamma' is for layer mix (got layer 1)"),
    ({"output": "average", "mix_weights": [0, 0, 0]}, "'mix_weights' is for layer mix (got layer average)"),
    ({"mix_gamma": 0.5}, "'mix_gamma' is for layer mix (got layer all)"),
    ({"layer": "top", "mix_weights": None}, "'mix_weights' is for layer mix (got layer top)"),
]


@pytest.mark.parametrize("fields, refusal", MIX_ONLY)
def test_fields_for_layer_mix_are_refused_without_it_by_the_parser_and_the_schema(fields, refusal):
    """``mix_gamma`` without ``layer: mix`` was ignored yet echoed, while ``mix_weights`` was refused: now both are
    refused alike, and the OpenAPI schema says the same as the parser."""
    from jsonschema import Draft202012Validator

    from elmo.serving.requests import request_schema

    body = {"sentences": [["a"]], **fields}
    schema_accepts = Draft202012Validator(request_schema(ServeOptions(), 3)).is_valid(body)
    if refusal is None:
        assert parse_embed_request(json.dumps(body).encode(), ServeOptions()).selection.layer == "mix"
        assert schema_accepts
        return
    with pytest.raises(RequestError) as e:
        parse_embed_request(json.dumps(body).encode(), ServeOptions())
    assert (e.value.status, e.value.message, e.value.reason) == (400, refusal, "schema")
    assert not schema_accepts


@pytest.mark.parametrize("number, refusal", [
    ("3.4028234663852886e38", None), ("-3.4028234663852886e38", None),
    ("3.40283e38", "'mix_gamma' 3.40283e+38 is beyond float32's range (at most 3.40282e+38 either way)"),
    ("-1e39", "'mix_gamma' -1e+39 is beyond float32's range (at most 3.40282e+38 either way)"),
    ("1" + "0" * 400, "the number 1000000000000000000000000000000000000... is too large for a float"),  # was a 500
    ("1e400", "the number 1e400 is too large for a float"),
])
def test_mix_gamma_must_fit_a_float32_as_the_schema_says(number, refusal):
    from jsonschema import Draft202012Validator

    from elmo.serving.requests import request_schema

    body = b'{"sentences": [["a"]], "layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": ' + number.encode() + b"}"
    if refusal is None:
        assert parse_embed_request(body, ServeOptions()).selection.mix_gamma == float(number)
    else:
        with pytest.raises(RequestError) as e:
            parse_embed_request(body, ServeOptions())
        assert (e.value.status, e.value.message, e.value.reason) == (400, refusal, "non_finite")
    gamma = request_schema(ServeOptions(), 3)["properties"]["mix_gamma"]
    if "e400" not in number and len(number) < 400:  # a float: the schema's range says what the parser does
        assert Draft202012Validator(gamma).is_valid(float(number)) is (refusal is None)


def test_an_answer_that_overflows_its_dtype_is_refused():
    import numpy as np

    from elmo.embedding.selection import VectorSelection
    from elmo.serving.requests import check_answer

    layers = np.full((3, 2, 4), 2.0, dtype=np.float32)  # (L + 1, n, 2P)
    fine = VectorSelection(layer="mix", mix_weights=(0, 0, 0), mix_gamma=1e38)
    check_answer([fine.apply(layers)], fine)
    with np.errstate(over="ignore"):
        for selection, message in [
            (VectorSelection(layer="mix", mix_weights=(0, 0, 0), mix_gamma=3e38),
             "sentences[1]'s vectors scaled by mix_gamma 3e+38 overflow float32 (largest 3.40282e+38): ask for a "
             "smaller mix_gamma"),
            (VectorSelection(layer="top", dtype="float16"),
             "sentences[1]'s vectors overflow float16 (largest 65504): ask for dtype float32"),
        ]:
            arrays = [selection.apply(np.ones_like(layers)), selection.apply(layers * 4e4)]
            with pytest.raises(RequestError) as e:
                check_answer(arrays, selection)
            assert (e.value.status, e.value.message, e.value.reason) == (400, message, "non_finite")


def test_the_port_and_the_initial_state_offer_only_what_the_service_takes(capsys):
    from elmo.cli import main

    with pytest.raises(SettingError, match=r"port must be a TCP port, 0 to 65535 \(0: any free port\), got 65536"):
        ServeOptions(port=65536)
    assert ServeOptions(port=0).port == 0 and ServeOptions(port=65535).port == 65535
    with pytest.raises(SettingError, match="initial_state must be one of zero, warm; got 'carry'"):
        ServeOptions(initial_state="carry")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--initial-state {zero,warm} where each sentence's LSTM state starts: zero or warm" in help_text
    assert help_text.count("carry") == 1 and "carry is not served" in help_text  # offered nowhere, explained once
    assert "--body-timeout SECONDS seconds a request's body may take to arrive" in help_text

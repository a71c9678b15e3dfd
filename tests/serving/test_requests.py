"""Checking a request body without a server: sentences split as ``elmo embed`` splits lines, defaults, limits."""

from __future__ import annotations

import json

import pytest

from elmo.sentences import read_sentences
from elmo.serving.metrics import Histogram, Metrics
from elmo.serving.requests import EmbedRequest, RequestError, check_nesting, parse_embed_request
from elmo.serving.serve_options import ServeOptions
from elmo.settings import SettingError


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
        asyncio.run(Guard(failing_app, metrics, api_key=None)(scope, None, None))
    assert metrics.responses["/v1/embed", 500] == 1

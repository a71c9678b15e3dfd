"""Checking a request body without a server: sentences split as ``elmo embed`` splits lines, defaults, limits."""

from __future__ import annotations

import json

import pytest

from elmo.sentences import read_sentences
from elmo.serving.metrics import Histogram, Metrics
from elmo.serving.requests import EmbedRequest, RequestError, parse_embed_request
from elmo.serving.serve_options import ServeOptions
from elmo.settings import SettingError


def test_strings_are_tokenised_like_elmo_embed_lines(tmp_path):
    texts = ["  The\u00a0bank\tis  here . ", "", "caf\u00e9 \u2014 ok"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    request = parse_embed_request(json.dumps({"sentences": texts}).encode(), ServeOptions())
    assert request == EmbedRequest([line.tokens for line in read_sentences(tmp_path / "in.txt")], "all", "float32")
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

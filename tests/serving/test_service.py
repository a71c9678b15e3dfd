"""The HTTP API over real loopback HTTP: answers equal the Embedder's, every bad request gets its 4xx with a
message naming what is wrong and the service keeps answering, the API key is enforced, concurrent requests are
merged and each gets its own sentences back."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from elmo.client import decode_npy
from tests.serving.conftest import SENTENCES, assert_close, expected, json_arrays


def test_health_ready_model_and_metrics(service):
    assert service.get("/healthz")[0] == 200
    status, _, body = service.get("/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "model": "demo"}
    model = json.loads(service.get("/v1/model")[2])
    assert (model["model"], model["num_layers"], model["output_dim"], model["precision"]) == ("demo", 3, 256, "fp32")
    assert (model["device"], model["initial_state"]) == ("cpu", "zero")
    assert model["limits"]["max_request_sentences"] == 16
    status, headers, text = service.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for name in ("elmo_requests_total", "elmo_sentences_total", "elmo_tokens_total", "elmo_batch_sentences_bucket",
                 "elmo_batch_tokens_bucket", "elmo_batch_seconds_bucket", "elmo_queue_requests",
                 "elmo_request_latency_seconds_bucket"):
        assert name in text.decode()


@pytest.mark.parametrize("output", ["all", "top", "average"])
def test_json_answers_equal_the_embedder(service, reference, output):
    status, headers, answer = service.post_json({"sentences": SENTENCES, "output": output})
    assert status == 200, answer
    assert answer["model"] == "demo" and headers["x-elmo-count"] == str(len(SENTENCES))
    # what computed the vectors, on every answer: the default is fp32 on every machine
    assert (headers["x-elmo-precision"], headers["x-elmo-device"]) == ("fp32", "cpu")
    assert (answer["precision"], answer["device"]) == ("fp32", "cpu")
    want = expected(reference, SENTENCES, output)
    assert answer["shapes"] == [list(w.shape) for w in want]
    assert_close(json_arrays(answer), want)


@pytest.mark.parametrize("fields", [{"pool": "mean", "layer": "average"}, {"pool": "first-last", "layer": 2},
                                    {"pool": "none", "layer": "mix", "mix_weights": [0.5, -1, 2], "mix_gamma": 0.5},
                                    {"pool": "max", "layer": "all"}])
def test_pooled_and_mixed_answers_equal_the_embedder(service, reference, fields):
    status, _, answer = service.post_json({"sentences": SENTENCES, **fields})
    assert status == 200, answer
    want = list(reference.embed_sentences([s.split() if isinstance(s, str) else s for s in SENTENCES], **fields))
    assert answer["pool"] == fields["pool"] and answer["shapes"] == [list(w.shape) for w in want]
    assert_close(json_arrays(answer), want)


def test_strings_are_split_on_whitespace_like_elmo_embed(service, reference):
    text = " The  river\tbank flooded . "
    status, _, answer = service.post_json({"sentences": [text], "output": "top"})
    assert status == 200
    assert_close([np.array(answer["embeddings"][0], dtype=np.float32)], expected(reference, [text.split()], "top"))


def test_binary_answer_is_concatenated_npy_in_request_order(service, reference):
    body = json.dumps({"sentences": SENTENCES, "dtype": "float16", "output": "top"}).encode()
    status, headers, data = service.request("POST", "/v1/embed", body, headers={"Accept": "application/x-npy"})
    assert status == 200 and headers["content-type"] == "application/x-npy"
    arrays = decode_npy(data)
    assert [a.dtype for a in arrays] == [np.float16] * len(SENTENCES)
    for got, want in zip(arrays, expected(reference, SENTENCES, "top")):
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2**-10, atol=1e-5)


def test_concurrent_requests_are_merged_and_each_gets_its_own_sentences(service, reference):
    rounds_before = _round_count(service)
    requests = [[SENTENCES[(i + k) % len(SENTENCES)] for k in range(1 + i % 3)] for i in range(12)]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda r: service.post_json({"sentences": r, "output": "top"}), requests))
    for sentences, (status, _, answer) in zip(requests, answers):
        assert status == 200
        assert_close(json_arrays(answer), expected(reference, sentences, "top"))
    assert _round_count(service) - rounds_before < len(requests), "no two requests shared a round"


def _round_count(service) -> int:
    text = service.get("/metrics")[2].decode()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("elmo_round_requests_count")))


BAD_REQUESTS = [
    (b"this is not json", 400, "the body is not JSON: Expecting value at line 1 column 1", "not_json"),
    (b'{"sentences": ["caf\xe9"]}', 400, "the body is not UTF-8 JSON", "not_utf8"),
    # json recurses once per level: 19,000 '[' (under the body limit) raised RecursionError, a 500
    (b"[" * 19_000, 400, "the body nests lists and objects 19000 deep, over the limit of 8", "nesting"),
    (b'{"sentences": [[[[[[[["x"]]]]]]]]}', 400, "nests lists and objects 9 deep, over the limit of 8", "nesting"),
    (b'{"sentences": [["x"]], "output": NaN}', 400, "the body holds NaN, which is not JSON", "non_finite"),
    (b'{"sentences": [Infinity]}', 400, "the body holds Infinity, which is not JSON", "non_finite"),
    (b'{"sentences": [[-Infinity]]}', 400, "the body holds -Infinity, which is not JSON", "non_finite"),
    (b'{"sentences": [1e999]}', 400, "the number 1e999 is too large for a float", "non_finite"),
    (b'{"sentences": [' + b"1" * 5000 + b"]}", 400, "has 5000 digits, too many", "non_finite"),  # was a 500
    # an integer too large for a float: OverflowError in float(), a 500 before
    (b'{"sentences": [["x"]], "layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": 1' + b"0" * 400 + b"}", 400,
     "the number 1000000000000000000000000000000000000... is too large for a float", "non_finite"),
    (b'{"sentences": [["x"]], "layer": "mix", "mix_weights": [1' + b"0" * 400 + b", 0, 0]}", 400,
     "is too large for a float", "non_finite"),
    ({"sentences": [["x"]], "layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": 1e39}, 400,
     "'mix_gamma' 1e+39 is beyond float32's range (at most 3.40282e+38 either way)", "non_finite"),
    # within float32, but the answer overflows (JSON has no Infinity: a 500 before)
    ({"sentences": [["x"]], "layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": 3.4e38}, 400,
     "sentences[0]'s vectors scaled by mix_gamma 3.4e+38 overflow float32 (largest 3.40282e+38): ask for a smaller "
     "mix_gamma", "non_finite"),
    ({"sentences": [["x"]], "layer": "mix", "mix_weights": [0, 0, 0], "mix_gamma": 1e6, "dtype": "float16"}, 400,
     "overflow float16 (largest 65504): ask for a smaller mix_gamma or dtype float32", "non_finite"),
    (b'{"sentences": [["a"]], "sentences": [["b"]]}', 400, "the key 'sentences' appears twice in one object",
     "duplicate_key"),
    ([["a"]], 400, 'the body must be a JSON object like {"sentences": [...]}, got a list', "schema"),
    ({}, 400, "'sentences' is missing", "schema"),
    ({"sentences": "one string"}, 400, "'sentences' must be a list of token lists or strings, got a string",
     "schema"),
    ({"sentences": [3]}, 400, "sentences[0] must be a list of tokens or a string, got a number", "schema"),
    ({"sentences": [["ok"], ["a", None]]}, 400, "sentences[1][1] must be a string (a token), got null", "schema"),
    ({"sentences": [["a", ""]]}, 400, "sentences[0][1] is an empty token", "schema"),
    ({"sentences": [["a b"]]}, 400, "sentences[0][0] 'a b' contains whitespace", "schema"),
    ({"sentences": [["x"]], "output": "middle"}, 400, "'output' must be one of all, top, average, mix or a layer "
     "index 0, 1, ...; got 'middle'", "schema"),
    ({"sentences": [["x"]], "dtype": "int8"}, 400, "'dtype' must be one of float32, float16; got 'int8'", "schema"),
    ({"sentences": [["x"]], "pool": "sum"}, 400, "'pool' must be one of none, mean, max, first-last; got 'sum'",
     "schema"),
    ({"sentences": [["x"]], "layer": 7}, 400, "'layer' 7 is not a layer of the model: it has layers 0 to 2", "schema"),
    ({"sentences": [["x"]], "layer": "mix"}, 400, "'mix_weights' must be given with layer mix", "schema"),
    ({"sentences": [["x"]], "layer": "mix", "mix_weights": [1, 2]}, 400, "'mix_weights' has 2 weights; the model has "
     "3 layers", "schema"),
    # a setting that does not apply is refused, whichever it is (mix_gamma was ignored, yet echoed)
    ({"sentences": [["x"]], "layer": "top", "mix_weights": [0, 0, 0]}, 400, "'mix_weights' is for layer mix (got "
     "layer top)", "schema"),
    ({"sentences": [["x"]], "layer": "top", "mix_gamma": 2}, 400, "'mix_gamma' is for layer mix (got layer top)",
     "schema"),
    ({"sentences": [["x"]], "output": "average", "mix_gamma": 1.0}, 400, "'mix_gamma' is for layer mix (got layer "
     "average)", "schema"),
    ({"sentences": [["x"]], "mix_gamma": 2}, 400, "'mix_gamma' is for layer mix (got layer all)", "schema"),
    ({"sentences": [["x"]], "layer": "top", "output": "top"}, 400, "give 'layer' or 'output' (its older name), not "
     "both", "schema"),
    ({"sentences": [["x"]], "layers": "top"}, 400, "unknown field 'layers' (the fields are: sentences, output, layer, "
     "pool, mix_weights, mix_gamma, dtype)", "schema"),
    ({"sentences": [["x"] * 41]}, 413, "sentences[0] has 41 tokens, over the limit of 40 per sentence", "too_large"),
    ({"sentences": [["x"]] * 17}, 413, "'sentences' holds 17 sentences, over the limit of 16 per request",
     "too_large"),
    ({"sentences": [["x"] * 40] * 3}, 413, "the request holds 120 tokens, over the limit of 100 per request",
     "too_large"),
    ({"sentences": [["x" * 30000]]}, 413, "over the limit of 20000 bytes", "too_large"),
]


@pytest.mark.parametrize("body, status, message, reason", BAD_REQUESTS, ids=[m[:30] for _, _, m, _ in BAD_REQUESTS])
def test_bad_request_gets_its_4xx_is_counted_and_the_service_keeps_answering(service, body, status, message, reason):
    counter = f'elmo_bad_requests_total{{reason="{reason}"}}'
    before, errors_before = service.metric(counter), _server_errors(service)
    got, headers, answer = service.post_json(body)
    assert got == status and headers["content-type"] == "application/json"
    assert message in answer["error"] and "\n" not in answer["error"]
    assert service.metric(counter) == before + 1
    assert _server_errors(service) == errors_before
    assert service.post_json({"sentences": [["still", "here"]]})[0] == 200


def _server_errors(service) -> int:
    text = service.get("/metrics")[2].decode()
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("elmo_requests_total")
               and 'code="5' in line)


def test_brackets_and_quotes_inside_tokens_do_not_count_as_nesting(service, reference):
    tokens = ["[[[[[[[[[[", "{{{{{{{{{", '"[[[[[[[[[[', "\\", "]]"]
    status, _, answer = service.post_json({"sentences": [tokens], "output": "top"})
    assert status == 200, answer
    assert_close(json_arrays(answer), expected(reference, [tokens], "top"))


@pytest.mark.parametrize("method, path, status, message", [
    ("GET", "/v1/embed", 405, "GET is not allowed on /v1/embed: use POST"),
    ("POST", "/healthz", 405, "POST is not allowed on /healthz: use GET"),
    ("DELETE", "/", 405, "DELETE is not allowed on /: use GET"),
    ("GET", "/v2/embed", 404, "no such path: /v2/embed (the API: /v1/embed, /v1/model, /healthz, /readyz, /metrics, "
                              "/openapi.json, /)"),
    ("POST", "/page/nothing.js", 404, "no such path: /page/nothing.js"),
])
def test_wrong_method_and_unknown_path_are_json_refusals(service, method, path, status, message):
    """Plain text before ("Not Found"), though every refusal is documented as JSON."""
    got, headers, body = service.request(method, path, b"{}" if method == "POST" else None)
    assert got == status and headers["content-type"] == "application/json"
    assert json.loads(body)["error"].startswith(message) and b"\n" not in body
    if status == 405:  # Allow names the methods the path takes, as the message does
        assert message.rsplit("use ", 1)[1] in headers["allow"].split(", ")
    # the routes beside them still answer: the API, its document, the page and its files
    for path in ("/v1/model", "/openapi.json", "/", "/page/explore.js"):
        assert service.get(path)[0] == 200, path


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", "test-key-0123"])
def test_api_key_is_required_on_every_path(service, authorization):
    for path in ("/v1/embed", "/healthz", "/metrics"):
        headers = {"Authorization": authorization} if authorization else {}
        request_headers = {**headers}
        service_headers, service.headers = service.headers, {}
        try:
            status, response_headers, body = service.request("POST" if path == "/v1/embed" else "GET", path,
                                                             b'{"sentences": [["a"]]}', headers=request_headers)
        finally:
            service.headers = service_headers
        assert status == 401 and response_headers["www-authenticate"] == "Bearer"
        assert json.loads(body)["error"].startswith("the API key is " + ("missing" if not authorization else "wrong"))


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_auth_scheme_is_case_insensitive(service, scheme):
    for path in ("/v1/embed", "/healthz"):
        status, _, body = service.request("POST" if path == "/v1/embed" else "GET", path, b'{"sentences": [["a"]]}',
                                          headers={"Authorization": f"{scheme} test-key-0123"})
        assert status == 200, body
    status, _, _ = service.get("/healthz", headers={"Authorization": "Basic test-key-0123"})
    assert status == 401


def test_a_client_that_leaves_mid_body_costs_nothing_and_logs_no_error(service):
    import socket
    import time

    before = service.metric("elmo_cancelled_requests_total")
    with socket.create_connection(("127.0.0.1", service.port)) as connection:  # promises 1000 bytes, sends 16
        connection.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                           b"Authorization: Bearer test-key-0123\r\n\r\n" + b'{"sentences": [[')
        time.sleep(0.2)
    service.wait_for("elmo_cancelled_requests_total", before + 1)
    assert service.metric("elmo_queue_requests") == 0
    assert service.post_json({"sentences": [["still", "here"]]})[0] == 200
    assert "Traceback" not in service.output()

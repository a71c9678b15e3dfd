"""Clients that hold a connection without finishing their request, against a real service on loopback: a body that
does not arrive within ``--body-timeout`` (half of it sent, or a byte now and then) gets a 408 JSON refusal and the
connection is closed, while other clients are served; an answer sent before the body was read (a wrong path, a
missing API key) closes the connection at once instead of waiting for the rest."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from tests.serving.conftest import API_KEY, Service

TIMEOUT = 1.5
SLACK = 5.0
"""Seconds past the deadline a connection may take to be closed, on a loaded 2-core machine."""
AT_ONCE = 2.5
"""Seconds an answer sent before the body may take to arrive and close the connection: under uvicorn's keep-alive
timeout (5 s), which closed such a connection before unless the client kept sending."""


@pytest.fixture(scope="module")
def impatient():
    running = Service("--body-timeout", str(TIMEOUT))
    yield running
    assert running.stop() == 0, running.output()


def open_request(port: int, path: str = "/v1/embed", declared: int = 1000, sent: bytes = b'{"sentences": [["a",',
                 headers: str = "") -> socket.socket:
    """A POST whose headers promise ``declared`` body bytes, of which only ``sent`` are sent."""
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
                       f"Content-Length: {declared}\r\n\r\n".encode() + sent)
    return connection


def answer_and_close(connection: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when (time.monotonic()) it did."""
    connection.settimeout(timeout)
    received = b""
    try:
        while chunk := connection.recv(65536):
            received += chunk
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {timeout} s; received {received[:200]!r}")
    finally:
        connection.close()
    return received, time.monotonic()


def status_and_error(response: bytes) -> tuple[int, dict[str, str], str]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)["error"]


@pytest.mark.slow
def test_bodies_that_do_not_arrive_in_time_get_408_and_are_closed(impatient):
    counter = 'elmo_bad_requests_total{reason="too_slow"}'
    before = impatient.metric(counter)
    started = time.monotonic()
    halves = [open_request(impatient.port) for _ in range(20)]  # half a body each, then nothing
    trickle = open_request(impatient.port, sent=b"{")
    dripping = threading.Event()

    def drip() -> None:  # a byte every 0.2 s: never idle, but never done
        try:
            while not dripping.wait(0.2):
                trickle.sendall(b" ")
        except OSError:  # closed by the service
            pass

    dripper = threading.Thread(target=drip)
    dripper.start()
    try:
        # meanwhile the service answers everyone else at once
        status, _, answer = impatient.post_json({"sentences": [["still", "served"]], "layer": "top"})
        assert status == 200 and answer["shapes"] == [[2, 256]]
        assert time.monotonic() - started < TIMEOUT, "the normal request waited for the slow ones"
        closed = [answer_and_close(c, TIMEOUT + SLACK) for c in halves]
        closed.append(answer_and_close(trickle, TIMEOUT + SLACK))
    finally:
        dripping.set()
        dripper.join()
    for response, when in closed:
        status, headers, message = status_and_error(response)
        assert status == 408 and headers["content-type"] == "application/json"
        assert headers["connection"] == "close"
        assert message == (f"the body did not arrive within {TIMEOUT:g} s of the headers (--body-timeout): send it "
                           "at once, or fewer sentences at a time")
        assert TIMEOUT - 0.1 <= when - started <= TIMEOUT + SLACK
    assert impatient.metric(counter) == before + 21
    assert impatient.post_json({"sentences": [["after"]]})[0] == 200
    assert "Traceback" not in impatient.output()
    # what /openapi.json and /v1/model say is what the clients got
    documented = json.loads(impatient.get("/openapi.json")[2])["paths"]["/v1/embed"]["post"]["responses"]["408"]
    assert [e["value"]["error"] for e in documented["content"]["application/json"]["examples"].values()] == [message]
    assert json.loads(impatient.get("/v1/model")[2])["limits"]["body_timeout"] == TIMEOUT


@pytest.mark.parametrize("path, headers, status, message", [
    ("/v1/embed", "", 401, "the API key is missing"),
    ("/v2/embed", f"Authorization: Bearer {API_KEY}\r\n", 404, "no such path: /v2/embed"),
    ("/healthz", f"Authorization: Bearer {API_KEY}\r\n", 405, "POST is not allowed on /healthz: use GET"),
    ("/v1/embed", f"Authorization: Bearer {API_KEY}\r\n", 413, "the body is 10000000 bytes or more"),
])
def test_an_answer_before_the_body_closes_the_connection_at_once(service, path, headers, status, message):
    """The service (with the default 30 s body timeout) answers without reading the body, and closes: it does not
    wait, 30 s or forever, for the rest of a body nobody will read."""
    started = time.monotonic()
    connection = open_request(service.port, path, declared=10_000_000, headers=headers)
    response, closed = answer_and_close(connection, AT_ONCE)
    got, response_headers, error = status_and_error(response)
    assert (got, response_headers["connection"]) == (status, "close") and error.startswith(message)
    assert closed - started < AT_ONCE
